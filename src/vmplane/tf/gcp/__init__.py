"""The generated OpenTofu/Terraform stack for Google Cloud (hashicorp/google)."""
