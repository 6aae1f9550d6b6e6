"""A commented starter spec file: the quickest way to a valid environment that explains itself."""

from __future__ import annotations

import json
import re

from vmplane.envspec.models import DNS_LABEL

_DNS_LABEL_RE = re.compile(DNS_LABEL)
_REGION_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")

# Placeholders are __UPPER__ words: JSON's braces rule out str.format and "$schema" rules out Template.
_TEMPLATE = """\
// vmplane environment __TITLE__.
// Editors complete and check this file from ./vmplane.env.schema.json.
// Check it with `vmplane validate`; try it on the emulated AWS account with `vmplane apply --sandbox`.
{
  "$schema": "./vmplane.env.schema.json",

  // The environment's identity: DNS-safe, 1-32 chars. Changing it means a new environment.
  "name": __NAME__,
  // Owning organisation id, written to every resource as the zop:orgId tag.
  "org": __ORG__,

  // Where the environment runs.
  "provider": {
    "cloud": "aws",
    "region": __REGION__,
    // "profile": "default", // a named AWS credentials profile (never read in sandbox mode)
  },

  // A new private VPC with NAT egress: VMs get no public IPs, and port 22 is never opened.
  "network": {
    "cidr": "10.40.0.0/16", // private, /16 to /24
    "zones": 2, // availability zones to spread subnets and VMs over (2-6)
    "ingressPorts": [80], // TCP ports open to sources inside the VPC only
  },

  // VM pools by name. "fixed": `size` VMs named <env>-<pool>-<index>.
  // "asg": an auto-scaling group; give "min", "max" and "desired" instead of "size".
  "pools": {
    "web": {
      "mode": "fixed",
      "size": 2,
      "instanceType": "t3.small",
      "image": "al2023", // an AMI id, an alias (al2023, ubuntu-24.04, debian-12) or ssm:/parameter/path
      "arch": "amd64", // must match the instance type
      "diskGb": 20, // encrypted gp3 root volume
    },
  },

  // First boot: "nginx" sets up Docker and NGINX; "bare" sets up Docker and the network only.
  "bootstrap": { "mode": "nginx", "timeoutSeconds": 900 },

  // Commands reach VMs through the cloud's IAM-gated exec channel (AWS: SSM), never SSH.
  "exec": { "mode": "SSM" },

  // Extra tags on every resource (the aws: prefix is reserved).
  "tags": {},

  // Environment variables and files (absolute path -> content) for workloads on every VM.
  "runtime": {
    "env": {},
    "files": {},
  },

  // A load balancer in front of the pools: uncomment and set your domain when you need one.
  // "loadBalancer": {
  //   "domain": "app.example.com",
  //   "certSource": "AWSACM", // or give "certificateArn" to reuse a certificate
  //   "targetPort": 80,
  //   "healthCheck": { "path": "/healthz", "port": 80 },
  // },
}
"""


def render_starter(name: str, org: str, region: str = "us-east-1") -> str:
    """Render a starter JSONC spec with one fixed pool of 2 VMs; raises ValueError on bad names."""
    for label, value in (("name", name), ("org", org)):
        if not _DNS_LABEL_RE.fullmatch(value):
            raise ValueError(
                f"{label} {value!r} is not a DNS label: use 1-32 lowercase letters, digits or '-', "
                "starting with a letter and not ending with '-'"
            )
    if not _REGION_RE.fullmatch(region):
        raise ValueError(f"region {region!r} is not a region name like 'us-east-1'")
    values = {
        "__TITLE__": f"{name!r} of organisation {org!r}",
        "__NAME__": json.dumps(name),
        "__ORG__": json.dumps(org),
        "__REGION__": json.dumps(region),
    }
    text = _TEMPLATE
    for placeholder, value in values.items():
        text = text.replace(placeholder, value)
    return text
