"""Kubernetes integration: pod attribution of NeuronCores and devices from the kubelet pod-resources API."""
