"""Pinned VM dependencies: the vmconfig manifests (what a VM's bootstrap installs, by version, URL and
sha256), their cache under `$VMPLANE_HOME/deps/`, and the Terraform provider cache."""
