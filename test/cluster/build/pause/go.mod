module kubexa.local/test-cluster/pause

go 1.26.0
