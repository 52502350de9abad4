# Runs b4's own CI check machinery (b4.review.checks, b4 >= 0.15) the way
# `b4 review tui`'s check key does (review_tui/_common.py, _fetch_and_check):
# the commands come from the git config of the repository in the current
# directory (b4.review-series-check-cmd, b4.review-perpatch-check-cmd),
# the cover letter goes to the series commands and each patch to the
# per-patch ones, with B4_TRACKING_FILE in their environment, and the
# results are stored in and read back from b4's result cache
# ($XDG_DATA_HOME/b4/review/ci.sqlite3). Prints JSON:
# {"version", "series": {msgid: [...]}, "perpatch": {msgid: [...]},
#  "cached": {msgid: [...]}}.
#
# usage: b4_review_checks.py TRACKING_FILE COVER.eml [PATCH.eml...]
import argparse
import email.parser
import email.policy
import json
import sys

import b4
import b4.review.checks as checks


def read(path):
    with open(path, 'rb') as f:
        msg = email.parser.BytesParser(policy=email.policy.EmailPolicy(utf8=True)).parse(f)
    return msg.get('message-id', '').strip('<> '), msg


def main():
    tracking, cover, patches = sys.argv[1], read(sys.argv[2]), [read(p) for p in sys.argv[3:]]
    b4.setup_config(argparse.Namespace(config=None))
    perpatch_cmds, series_cmds = checks.load_check_cmds()
    topdir = b4.git_get_toplevel()
    env = {'B4_TRACKING_FILE': tracking} if tracking else {}
    out = {'version': b4.__VERSION__, 'perpatch_cmds': perpatch_cmds, 'series_cmds': series_cmds}
    out['series'] = {cover[0]: checks.run_series_checks(cover, series_cmds, topdir, extra_env=env)}
    out['perpatch'] = checks.run_perpatch_checks(patches, perpatch_cmds, topdir, extra_env=env)
    conn = checks.get_db()
    for mid, res in list(out['series'].items()) + list(out['perpatch'].items()):
        checks.store_results(conn, mid, res)
    out['cached'] = checks.get_cached_results(conn, [cover[0]] + [p[0] for p in patches])
    conn.close()
    json.dump(out, sys.stdout, indent=1)


main()
