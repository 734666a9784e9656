package broker

import "testing"

func TestBrokerMessage(t *testing.T) {
	tests := map[string]string{
		`{"error":{"code":"forbidden","message":"token is for another instance"}}`: "forbidden: token is for another instance",
		`{"error":"starting up"}`:  "starting up",
		`<html>bad gateway</html>`: "<html>bad gateway</html>",
	}
	for in, want := range tests {
		if got := brokerMessage([]byte(in)); got != want {
			t.Errorf("brokerMessage(%s) = %q, want %q", in, got, want)
		}
	}
}
