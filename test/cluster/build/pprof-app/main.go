// pprof-app: a tiny workload for the profile tests. It serves net/http/pprof on --listen and
// keeps a few goroutines busy (CPU and allocations) so that every profile type has samples.
// Prints "listening <address>" on stdout once it accepts connections.
package main

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"time"
)

var retained [][]byte

func burn() {
	sum := sha256.Sum256([]byte("kubexa"))
	for {
		for i := 0; i < 10000; i++ {
			sum = sha256.Sum256(sum[:])
		}
		time.Sleep(time.Millisecond)
	}
}

func allocate() {
	for {
		retained = append(retained, make([]byte, 64*1024))
		if len(retained) > 64 {
			retained = retained[1:]
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve /debug/pprof on")
	flag.Parse()
	listener, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	go burn()
	go allocate()
	fmt.Printf("listening %s\n", listener.Addr())
	if err := http.Serve(listener, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
