package bearer

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestTransport(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	for _, token := range []string{"s3cret", ""} {
		req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := (&http.Client{Transport: Transport{Next: http.DefaultTransport, Token: token}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if h := req.Header.Get("Authorization"); h != "" {
			t.Errorf("the caller's request was changed: Authorization %q", h)
		}
	}
	if len(got) != 2 || got[0] != "Bearer s3cret" || got[1] != "" {
		t.Errorf("the server saw Authorization %q, want [\"Bearer s3cret\" \"\"]", got)
	}
}
