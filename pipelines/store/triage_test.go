package store

import "testing"

// A triage command is claimed once; the second claim of the same (list,
// reply, position) says it was read before. On both databases.
func TestTriageClaimOnce(t *testing.T) {
	eachDB(t, func(t *testing.T, db string) {
		s, _ := openTemp(t, db)
		c := TriageCommand{List: "l", MsgID: "r1@x", Index: 0, Sender: "a@x", Command: "#patcheval retest"}
		id, claimed, err := s.ClaimTriage(c)
		if err != nil || !claimed || id == 0 {
			t.Fatalf("first claim: %d %v %v", id, claimed, err)
		}
		if _, again, err := s.ClaimTriage(c); err != nil || again {
			t.Fatalf("second claim: %v %v", again, err)
		}
		c.Index = 1
		if _, claimed, err := s.ClaimTriage(c); err != nil || !claimed {
			t.Fatalf("another position: %v %v", claimed, err)
		}
		if err := s.FinishTriage(id, TriageIgnored, "not permitted"); err != nil {
			t.Fatal(err)
		}
		cs, err := s.TriageCommands("l")
		if err != nil || len(cs) != 2 || cs[0].Status != TriageIgnored || cs[0].Note != "not permitted" || cs[1].Status != TriageClaimed {
			t.Fatalf("commands %+v %v", cs, err)
		}
		if cs, _ := s.TriageCommands("other"); len(cs) != 0 {
			t.Errorf("another list: %+v", cs)
		}
		p, err := s.EnqueuePost(Post{Reporter: "mail", Target: "t", Digest: "d", Payload: "{}"}, false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.MarkPostSending(p.ID, "report@x"); err != nil {
			t.Fatal(err)
		}
		if got, err := s.PostByRemoteID("mail", "report@x"); err != nil || got == nil || got.ID != p.ID {
			t.Errorf("PostByRemoteID: %+v %v", got, err)
		}
		if got, err := s.PostByRemoteID("mail", "other@x"); err != nil || got != nil {
			t.Errorf("PostByRemoteID of an unknown id: %+v %v", got, err)
		}
	})
}
