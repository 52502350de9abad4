#!/usr/bin/env python3
"""Writes the small series-shape threads (shape-*.mbox) used by the series
tests. Run from this directory: ./gen-shapes.py. The output is committed;
the tests do not run this script."""

import hashlib

A = 'Alice Author <alice@example.org>'
B = 'Bob Reviewer <bob@example.com>'
C = 'Carol Tester <carol@example.net>'
M = 'Mallory Other <mallory@example.biz>'
J_HOME = 'Jane Doe <jane@home.example>'

def diff(path, old, new):
    o = hashlib.sha1(old.encode()).hexdigest()[:12]
    n = hashlib.sha1(new.encode()).hexdigest()[:12]
    return (f'diff --git a/{path} b/{path}\n'
            f'index {o}..{n} 100644\n'
            f'--- a/{path}\n+++ b/{path}\n'
            f'@@ -1,3 +1,3 @@\n int a;\n-{old}\n+{new}\n int b;\n')

def patch_body(msg, d, sob=A):
    return (f'{msg}\n\nSigned-off-by: {sob}\n---\n'
            ' x | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)\n\n'
            + d + '-- \n2.43.0\n')

def cover_body(text, n):
    return (f'{text}\n\nAlice Author ({n}):\n  things\n\n'
            f' x | {2*n} +-\n {n} files changed, {n} insertions(+), {n} deletions(-)\n\n'
            'base-commit: 0123456789abcdef0123456789abcdef01234567\n'
            'change-id: 20260101-shape-0123456789ab\n-- \n2.43.0\n')

class Thread:
    def __init__(self, name):
        self.name, self.msgs, self.n = name, [], 0

    def add(self, frm, subject, body, parent=None, refs=None, minute=None):
        self.n += 1
        mid = f'{self.name}-{self.n}@example.org'
        minute = self.n if minute is None else minute
        h = [f'From: {frm}', 'To: shapes@example.org', f'Subject: {subject}',
             f'Date: Mon, 5 Jan 2026 10:{minute:02d}:00 +0000', f'Message-ID: <{mid}>']
        if parent:
            chain = (refs or []) + [parent]
            h.append(f'In-Reply-To: <{parent}>')
            h.append('References: ' + ' '.join(f'<{r}>' for r in chain))
        h += ['MIME-Version: 1.0', 'Content-Type: text/plain; charset=UTF-8',
              'Content-Transfer-Encoding: 8bit']
        self.msgs.append('\n'.join(h) + '\n\n' + body)
        return mid

    def write(self):
        with open(f'shape-{self.name}.mbox', 'w') as f:
            for m in self.msgs:
                f.write('From mboxrd@z Thu Jan  1 00:00:00 1970\n')
                f.write(m if m.endswith('\n') else m + '\n')
                f.write('\n')

def series(t, prefix, n, cover=True, start=0, tag='', parent=None, refs=None):
    ids = {}
    c = None
    if cover:
        c = t.add(A, f'[{prefix} 0/{n}] shapes: a {tag}series', cover_body('This series does things.', n), parent, refs)
        ids[0] = c
    first = None
    for i in range(1, n + 1):
        par = c or first
        r = ([] if not par else ([] if par == c and not refs else (refs or []) + ([c] if c else [])))
        pid = t.add(A, f'[{prefix} {i}/{n}] shapes: change {i}',
                    patch_body(f'Change number {i} of the {tag}series.', diff(f'f{i}.c', f'int v{i} = 0;', f'int v{i} = {len(tag)+1};')),
                    par, (refs or []) + ([c] if c and par != c else []) if par else None)
        ids[i] = pid
        if first is None and not cover:
            first = pid
    return ids

def review(t, frm, parent, text, refs=None):
    return t.add(frm, 'Re: ' + parent[1], text, parent[0], refs)

# 1. Partial re-roll: v2 re-sends only 2/3 as a reply to v1 2/3.
t = Thread('partial-reroll')
v1 = series(t, 'PATCH', 3)
t.add(B, 'Re: [PATCH 1/3] shapes: change 1', '> Change number 1\n\nReviewed-by: Bob Reviewer <bob@example.com>\n', v1[1], [v1[0]])
t.add(A, '[PATCH v2 2/3] shapes: change 2',
      patch_body('Change number 2, fixed as Bob asked.', diff('f2.c', 'int v2 = 0;', 'int v2 = 42;')),
      v1[2], [v1[0]])
t.write()

# 2. Missing part: 2/3 never arrived.
t = Thread('missing')
c = t.add(A, '[PATCH 0/3] shapes: a series with a hole', cover_body('One patch is lost.', 3))
t.add(A, '[PATCH 1/3] shapes: change 1', patch_body('Change 1.', diff('f1.c', 'int v1 = 0;', 'int v1 = 1;')), c)
t.add(A, '[PATCH 3/3] shapes: change 3', patch_body('Change 3.', diff('f3.c', 'int v3 = 0;', 'int v3 = 3;')), c)
t.write()

# 3. No cover letter: 2/2 replies to 1/2; an Acked-by on 2/2, a Tested-by
#    on 1/2 given in a reply to a reply.
t = Thread('no-cover')
p1 = t.add(A, '[PATCH 1/2] shapes: first', patch_body('First.', diff('a.c', 'int a1 = 0;', 'int a1 = 1;')))
p2 = t.add(A, '[PATCH 2/2] shapes: second', patch_body('Second.', diff('b.c', 'int b1 = 0;', 'int b1 = 1;')), p1, [])
r = t.add(B, 'Re: [PATCH 1/2] shapes: first', '> First.\n\nWhy?\n', p1)
t.add(C, 'Re: [PATCH 1/2] shapes: first', '> Why?\n\nBecause. Works for me:\n\nTested-by: Carol Tester <carol@example.net>\n', r, [p1])
t.add(B, 'Re: [PATCH 2/2] shapes: second', 'Acked-by: Bob Reviewer <bob@example.com>\n', p2, [p1])
t.write()

# 4. RFC with a cover-letter review (applies to every patch) and a
#    trailer from the wrong sender (refused).
t = Thread('rfc')
c = t.add(A, '[RFC PATCH v2 0/2] shapes: an idea', cover_body('Just an idea.', 2))
q1 = t.add(A, '[RFC PATCH v2 1/2] shapes: idea one', patch_body('Idea one.', diff('i.c', 'int i1 = 0;', 'int i1 = 1;')), c)
q2 = t.add(A, '[RFC PATCH v2 2/2] shapes: idea two', patch_body('Idea two.', diff('j.c', 'int j1 = 0;', 'int j1 = 1;')), c)
t.add(B, 'Re: [RFC PATCH v2 0/2] shapes: an idea',
      'On Mon, Alice wrote:\n> Just an idea.\n> Reviewed-by: Quoted Person <quoted@example.org>\n\nFor the whole series:\n\nReviewed-by: Bob Reviewer <bob@example.com>\n\nBob\n', c)
t.add(M, 'Re: [RFC PATCH v2 2/2] shapes: idea two',
      'Forwarding a review from Carol:\n\nReviewed-by: Carol Tester <carol@example.net>\n', q2, [c])
t.add('Jane Doe <jane@home.example>', 'Re: [RFC PATCH v2 1/2] shapes: idea one',
      'Acked-by: Jane Doe <jane@work.example>\n', q1, [c])
t.write()

# 5. net-next tree prefix, v3, wrapped trailer value and a Fixes: line.
t = Thread('net-next')
c = t.add(A, '[PATCH net-next v3 0/2] net: shapes', cover_body('Networking shapes.', 2))
n1 = t.add(A, '[PATCH net-next v3 1/2] net: shape one', patch_body('Net one.', diff('n.c', 'int n1 = 0;', 'int n1 = 1;')), c)
n2 = t.add(A, '[PATCH net-next v3 2/2] net: shape two', patch_body('Net two.', diff('o.c', 'int o1 = 0;', 'int o1 = 1;')), c)
t.add(C, 'Re: [PATCH net-next v3 2/2] net: shape two',
      'Tested-by: Carol Tester\n <carol@example.net>\n', n2, [c])
t.write()

# 6. Several versions in one thread: v1 (no cover), then v2 with a cover
#    as a reply to v1; v1 1/2 got a Reviewed-by and is unchanged in v2 (its
#    trailer is carried over); v1 2/2 got one too but changed in v2 (not
#    carried).
t = Thread('versions')
a1 = t.add(A, '[PATCH 1/2] shapes: keep', patch_body('Keep me.', diff('k.c', 'int k = 0;', 'int k = 1;')))
a2 = t.add(A, '[PATCH 2/2] shapes: change', patch_body('Change me.', diff('c.c', 'int c = 0;', 'int c = 1;')), a1)
t.add(B, 'Re: [PATCH 1/2] shapes: keep', 'Reviewed-by: Bob Reviewer <bob@example.com>\n', a1)
t.add(B, 'Re: [PATCH 2/2] shapes: change', 'Reviewed-by: Bob Reviewer <bob@example.com>\nbut please use 2\n', a2, [a1])
c = t.add(A, '[PATCH v2 0/2] shapes: versions', cover_body('v2: use 2.', 2), a1)
t.add(A, '[PATCH v2 1/2] shapes: keep', patch_body('Keep me.', diff('k.c', 'int k = 0;', 'int k = 1;')), c, [a1])
t.add(A, '[PATCH v2 2/2] shapes: change', patch_body('Change me.', diff('c.c', 'int c = 0;', 'int c = 2;')), c, [a1])
t.write()
