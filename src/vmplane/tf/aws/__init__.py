"""The AWS stack (hashicorp/aws, no registry modules): the shape the direct pipeline builds."""
