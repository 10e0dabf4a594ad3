"""Host interfaces: procfs parsing, the file-system root, EC2 instance metadata."""
