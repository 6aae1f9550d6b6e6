"""The Proxmox VE driver: CloudDriver over the cluster's HTTPS API (proxmoxer, an API token)."""
