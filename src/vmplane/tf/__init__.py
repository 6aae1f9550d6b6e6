"""The environment as a managed OpenTofu/Terraform stack."""
