module kubexa.dev/test/pprof-app

go 1.24
