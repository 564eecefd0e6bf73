// Command echo is the Herald lab's test backend. It answers HTTP and UDP with the name of its pod and node
// (from the POD_NAME and NODE_NAME environment variables), so that tests and the demo see which backend served
// them.
//
//	GET /           one line of text: "echo from pod P on node N (client C)"
//	GET /json       the same as JSON: {"pod","node","client"}
//	GET /interfaces the pod's network interfaces and their addresses as JSON (for hostNetwork checks)
//	UDP             every datagram is answered with "<payload>|<pod>|<node>"
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
)

type reply struct {
	Pod    string `json:"pod"`
	Node   string `json:"node"`
	Client string `json:"client"`
}

type iface struct {
	Name  string   `json:"name"`
	MAC   string   `json:"mac"`
	Up    bool     `json:"up"`
	Addrs []string `json:"addrs"`
}

func interfaces() ([]iface, error) {
	ifis, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	out := make([]iface, 0, len(ifis))
	for _, ifi := range ifis {
		addrs, err := ifi.Addrs()
		if err != nil {
			return nil, err
		}
		it := iface{Name: ifi.Name, MAC: ifi.HardwareAddr.String(), Up: ifi.Flags&net.FlagUp != 0, Addrs: []string{}}
		for _, a := range addrs {
			it.Addrs = append(it.Addrs, a.String())
		}
		out = append(out, it)
	}
	return out, nil
}

func main() {
	httpAddr := flag.String("http", ":8080", "HTTP listen address")
	udpAddr := flag.String("udp", ":9090", "UDP listen address")
	flag.Parse()
	pod, node := os.Getenv("POD_NAME"), os.Getenv("NODE_NAME")
	if pod == "" {
		pod, _ = os.Hostname()
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "echo from pod %s on node %s (client %s)\n", pod, node, r.RemoteAddr)
	})
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(reply{Pod: pod, Node: node, Client: r.RemoteAddr})
	})
	mux.HandleFunc("/interfaces", func(w http.ResponseWriter, r *http.Request) {
		ifs, err := interfaces()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ifs)
	})

	pc, err := net.ListenPacket("udp", *udpAddr)
	if err != nil {
		log.Fatalf("udp: %v", err)
	}
	go func() {
		buf := make([]byte, 2048)
		suffix := []byte("|" + pod + "|" + node)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				log.Printf("udp: %v", err)
				return
			}
			out := append(append([]byte{}, buf[:n]...), suffix...)
			if _, err := pc.WriteTo(out, from); err != nil {
				log.Printf("udp reply to %s: %v", from, err)
			}
		}
	}()

	ln, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		log.Fatalf("http: %v", err)
	}
	go func() {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
		<-sigs
		os.Exit(0)
	}()
	log.Printf("echo: pod %s node %s, http %s, udp %s", pod, node, *httpAddr, *udpAddr)
	log.Fatal(http.Serve(ln, mux))
}
