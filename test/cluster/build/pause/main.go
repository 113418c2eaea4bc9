// The pod sandbox's pause process for the test cluster's real node: it holds the pod's
// namespaces open, reaps orphaned children (it is PID 1 of pods that share their PID namespace)
// and exits at once on SIGINT or SIGTERM. No registry is reachable here, so the image is built
// locally from this file.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
