package explain

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/config/v1beta1"
)

// Escape sequences an attacker who may write objects could put on the
// operator's terminal: clear the screen, an OSC 8 hyperlink, the C1 CSI.
const (
	clearScreen = "\x1b[2J"
	osc8Link    = "\x1b]8;;https://evil.example/\x1b\\click here\x1b]8;;\x1b\\"
	c1CSI       = "\u009b31m"
)

// terminalSafe fails t when out holds a byte or rune a terminal obeys:
// ESC, BEL, any other C0 control but newline and the tabwriter's padding
// (spaces), DEL, a C1 control, or invalid UTF-8.
func terminalSafe(t *testing.T, out string) {
	t.Helper()
	if i := strings.IndexByte(out, 0x1b); i >= 0 {
		t.Errorf("output holds ESC (0x1b) at byte %d:\n%q", i, out)
	}
	if !utf8.ValidString(out) {
		t.Errorf("output is not valid UTF-8:\n%q", out)
	}
	for _, r := range out {
		if (r < 0x20 && r != '\n') || (r >= 0x7f && r <= 0x9f) {
			t.Errorf("output holds control %U:\n%q", r, out)
			break
		}
	}
}

// TestWriteEscapesObjectText: `kubectl herald explain` of a Service whose
// name, condition message and events hold escape sequences prints them as
// visible escapes, never raw.
func TestWriteEscapesObjectText(t *testing.T) {
	w := site()
	name := "web" + clearScreen
	w.Services[0] = service(name, "192.0.2.1")
	w.Services[0].Status.Conditions[0].Message = "assigned 192.0.2.1 " + osc8Link
	w.Services[0].Status.Conditions = append(w.Services[0].Status.Conditions,
		metav1.Condition{Type: svcstatus.ConditionAnnounced, Status: metav1.ConditionFalse, Reason: "Bell\a", Message: "bad\xff byte " + c1CSI})
	w.Slices[0] = slice(name, "n2")
	w.Events = []corev1.Event{{
		ObjectMeta:     metav1.ObjectMeta{Namespace: "default", Name: "ev1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Service", Namespace: "default", Name: name, UID: w.Services[0].UID},
		Type:           corev1.EventTypeWarning,
		Reason:         "Evil" + clearScreen,
		Message:        "see " + osc8Link + " " + c1CSI + "\tcolumn\nline",
		Source:         corev1.EventSource{Component: "x" + c1CSI},
		Count:          1,
		LastTimestamp:  metav1.NewTime(time.Now()),
	}}
	rep, err := ExplainService(w, "default/"+name)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep.Service, clearScreen) || len(rep.Warnings) != 1 {
		t.Fatalf("report %+v: want the raw name and the event in it (escaping is the printer's)", rep)
	}
	for _, wide := range []bool{false, true} {
		var buf bytes.Buffer
		if err := Write(&buf, rep, wide, time.Now()); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		terminalSafe(t, out)
		for _, want := range []string{
			`Service:   default/web\x1b[2J`,
			`assigned 192.0.2.1 \x1b]8;;https://evil.example/\x1b\click here\x1b]8;;\x1b\`,
			`Announced: False Bell\a: bad\xff byte \u009b31m`,
			`Evil\x1b[2J (x1, x\u009b31m`,
			`\u009b31m\tcolumn\nline`,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("wide %v: output lacks %q:\n%s", wide, want, out)
			}
		}
	}
}

// TestWriteStatusEscapesObjectText: `kubectl herald status` prints the
// names and problems of configuration objects escaped.
func TestWriteStatusEscapesObjectText(t *testing.T) {
	w := site()
	w.Config.Pools[0].Name = "l2" + clearScreen
	w.Config.L2Advertisements[0].Spec.IPAddressPools = []string{w.Config.Pools[0].Name}
	w.Services = append(w.Services, service("waits", ""))
	w.Services[1].Status.Conditions = []metav1.Condition{{Type: svcstatus.ConditionType, Status: metav1.ConditionFalse, Reason: "PoolExhausted", Message: "no free address " + osc8Link}}
	w.Config.L2Advertisements = append(w.Config.L2Advertisements, v1beta1.L2Advertisement{
		ObjectMeta: metav1.ObjectMeta{Name: "broken" + c1CSI, Namespace: testNS},
		Spec:       v1beta1.L2AdvertisementSpec{IPAddressPools: []string{"l2"}, Interfaces: []string{"bad/" + clearScreen}},
	})
	rep := Status(w)
	if len(rep.Configuration) == 0 {
		t.Fatalf("configuration %+v: want the broken advertisement", rep.Configuration)
	}
	var buf bytes.Buffer
	if err := WriteStatus(&buf, rep, true); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	terminalSafe(t, out)
	for _, want := range []string{`l2\x1b[2J`, `no free address \x1b]8;;`, `L2Advertisement broken\u009b31m`} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
}
