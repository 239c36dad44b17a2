package cluster

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
)

// TestRelayHoldsEveryByteUntilReleased: through a held relay nothing
// arrives, in either direction; once released, all of it does, in order.
func TestRelayHoldsEveryByteUntilReleased(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	r, err := newRelay(echo.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	c, err := net.Dial("tcp", r.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lines := bufio.NewReader(c)
	read := func(d time.Duration) (string, error) {
		_ = c.SetReadDeadline(time.Now().Add(d))
		return lines.ReadString('\n')
	}
	if _, err := c.Write([]byte("one\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := read(5 * time.Second); got != "one\n" {
		t.Fatalf("before holding: %q, %v", got, err)
	}
	r.hold(true)
	if _, err := c.Write([]byte("two\nthree\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := read(300 * time.Millisecond); err == nil || got != "" {
		t.Fatalf("held, yet %q came through", got)
	}
	r.hold(false)
	for _, want := range []string{"two\n", "three\n"} {
		if got, err := read(5 * time.Second); got != want {
			t.Fatalf("released: %q, %v; want %q", got, err, want)
		}
	}
}
