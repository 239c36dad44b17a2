package main

import "testing"

func TestHeadlinesKeepATestsOwnLinesAndDropWhatContinuesThem(t *testing.T) {
	out := []string{
		"=== RUN   TestX\n",
		"    x_test.go:12: first ReplicaSet: 31ms\n",
		"    courier_test.go:106: courier log (127.0.0.1:1):\n",
		"        {\"level\":\"info\"}\n",
		"        x_test.go:99: not a headline: it continues a log\n",
		"    x_test.go:13: api told what it waits for: not within 5s\n",
		"--- FAIL: TestX (6.64s)\n",
	}
	want := "    x_test.go:12: first ReplicaSet: 31ms\n" +
		"    courier_test.go:106: courier log (127.0.0.1:1):\n" +
		"    x_test.go:13: api told what it waits for: not within 5s\n" +
		"--- FAIL: TestX (6.64s)\n"
	if got := headlines(out); got != want {
		t.Errorf("headlines:\n%s\nwant:\n%s", got, want)
	}
}
