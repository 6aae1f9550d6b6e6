"""A commented starter spec file: the quickest way to a valid environment that explains itself."""

from __future__ import annotations

import json
import re

from vmplane.envspec.models import DNS_LABEL, Cloud
from vmplane.envspec.provider import GCP_PROJECT

_DNS_LABEL_RE = re.compile(DNS_LABEL)
_REGION_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")

# Placeholders are __UPPER__ words: JSON's braces rule out str.format and "$schema" rules out Template.
_TEMPLATE = """\
// vmplane environment __TITLE__.
// Editors complete and check this file from ./vmplane.env.schema.json.
// Check it with `vmplane validate`.__SANDBOX_HINT__
{
  "$schema": "./vmplane.env.schema.json",

  // The environment's identity: DNS-safe, 1-32 chars. Changing it means a new environment.
  "name": __NAME__,
  // Owning organisation id, written to every resource as the zop:orgId tag.
  "org": __ORG__,

  // Where the environment runs.
  "provider": {
__PROVIDER__
  },

  // __NETWORK__
  "network": {
    "cidr": "10.40.0.0/16", // private, /16 to /24
    "zones": 2, // zones to spread VMs over (2-6)
    "ingressPorts": [80], // TCP ports open to sources inside the private network only
  },

  // VM pools by name. "fixed": `size` VMs named <env>-<pool>-<index>.
  // "asg": an auto-scaling group; give "min", "max" and "desired" instead of "size".
  "pools": {
    "web": {
      "mode": "fixed",
      "size": 2,
__MACHINE__
      "arch": "amd64", // must match the instance type
      "diskGb": 20, // encrypted root volume
    },
  },

  // First boot: "nginx" sets up Docker and NGINX; "bare" sets up Docker and the network only.
  "bootstrap": { "mode": "nginx", "timeoutSeconds": 900 },

  // Commands reach VMs through the cloud's own exec channel, never SSH.
  "exec": { "mode": __EXEC__ },

  // Extra tags on every resource.
  "tags": {},

  // Environment variables and files (absolute path -> content) for workloads on every VM.
  // A secret is a reference, never the value: the VM reads it with its own identity, and the file, the
  // job record and the generated stack hold only the reference. Uncomment and name your own secret:
  "runtime": {
    "env": {
      // "DB_PASSWORD": { "secret": __SECRET_ENV__ },
    },
    "files": {
      // "/etc/app/api.key": { "secret": __SECRET_FILE__ }, // written root-only (0600)
    },
  },

__LOAD_BALANCER__
}
"""

_LB = """\
  // A load balancer in front of the pools: uncomment and set your domain when you need one.
  // "loadBalancer": {
  //   "domain": "app.example.com",
  //   "certSource": __CERT__, // or give "certificateArn" to reuse a certificate
  //   "targetPort": 80,
  //   "healthCheck": { "path": "/healthz", "port": 80 },
  // },"""

# Per cloud: a commented example of each runtime secret reference, in the cloud's own store (Proxmox VE
# has none: the operator's environment at push time).
_SECRET_EXAMPLES: dict[Cloud, tuple[str, str]] = {
    Cloud.aws: ("aws-sm:prod/db#password", "aws-ssm:/prod/app/api-key"),
    Cloud.gcp: ("gcp-sm:db-password", "gcp-sm:api-key/versions/2"),
    Cloud.proxmox: ("env:DB_PASSWORD", "env:APP_API_KEY"),
}

# Per cloud: provider members, network comment, pool machine lines, exec mode, cert source (None: no LB).
_CLOUDS: dict[Cloud, tuple[str, str, str, str, str | None]] = {
    Cloud.aws: (
        """    "cloud": "aws",
    "region": __REGION__,
    // "profile": "default", // a named AWS credentials profile (never read in sandbox mode)""",
        "A new private VPC with NAT egress: VMs get no public IPs, and port 22 is never opened.",
        """      "instanceType": "t3.small",
      "image": "al2023", // an AMI id, an alias (al2023, ubuntu-24.04, debian-12) or ssm:/parameter/path""",
        "SSM",
        "AWSACM",
    ),
    Cloud.gcp: (
        """    "cloud": "gcp",
    "project": __PROJECT__, // your Google Cloud project id
    "region": __REGION__,""",
        "A new private VPC network with Cloud NAT egress: VMs get no public IPs, port 22 is never opened.",
        """      "instanceType": "e2-small",
      "image": "ubuntu-24.04", // an image family or image; Google's Debian images do not run cloud-init""",
        "OSConfig",
        "GCPManaged",
    ),
    Cloud.proxmox: (
        """    "cloud": "proxmox",
    "endpoint": "https://pve.example:8006", // your Proxmox VE API
    "node": "pve1", // or "nodes": ["pve1", "pve2"]
    // "caFile": "/etc/vmplane/pve-ca.pem", // the CA of the API's certificate""",
        "VMs on a private network; port 22 is never opened.",
        """      "template": "debian-12-cloud", // the template VM to clone (name or VMID); init-node makes this one
      "cores": 2,
      "memoryMb": 2048,""",
        "QemuGuestAgent",
        None,
    ),
}
_DEFAULT_REGION = {Cloud.aws: "us-east-1", Cloud.gcp: "us-central1"}


def render_starter(
    name: str,
    org: str,
    region: str | None = None,
    *,
    cloud: Cloud = Cloud.aws,
    project: str = "my-gcp-project",
) -> str:
    """Render a starter JSONC spec with one fixed pool of 2 VMs; raises ValueError on bad input.
    `region` defaults per cloud (Proxmox has none); `project` is only used for gcp."""
    if cloud not in _CLOUDS:
        raise ValueError(f"no starter for {cloud} (choose {', '.join(_CLOUDS)})")
    for label, value in (("name", name), ("org", org)):
        if not _DNS_LABEL_RE.fullmatch(value):
            raise ValueError(
                f"{label} {value!r} is not a DNS label: use 1-32 lowercase letters, digits or '-', "
                "starting with a letter and not ending with '-'"
            )
    region = region if region is not None else _DEFAULT_REGION.get(cloud, "")
    if cloud is not Cloud.proxmox and not _REGION_RE.fullmatch(region):
        raise ValueError(f"region {region!r} is not a region name like {_DEFAULT_REGION[cloud]!r}")
    if cloud is Cloud.gcp and not re.fullmatch(GCP_PROJECT, project):
        raise ValueError(f"project {project!r} is not a Google Cloud project id")
    provider, network, machine, exec_mode, cert = _CLOUDS[cloud]
    lb = _LB.replace("__CERT__", json.dumps(cert)) if cert else f"  // {cloud} has no managed load balancer."
    hint = " Try it on the emulated AWS account with `vmplane apply --sandbox`." if cloud is Cloud.aws else ""
    values = {
        "__TITLE__": f"{name!r} of organisation {org!r}",
        "__SANDBOX_HINT__": hint,
        "__PROVIDER__": provider,
        "__NETWORK__": network,
        "__MACHINE__": machine,
        "__EXEC__": json.dumps(exec_mode),
        "__LOAD_BALANCER__": lb,
        "__SECRET_ENV__": json.dumps(_SECRET_EXAMPLES[cloud][0]),
        "__SECRET_FILE__": json.dumps(_SECRET_EXAMPLES[cloud][1]),
        # Substituted last: they sit inside the blocks above.
        "__NAME__": json.dumps(name),
        "__ORG__": json.dumps(org),
        "__REGION__": json.dumps(region),
        "__PROJECT__": json.dumps(project),
    }
    text = _TEMPLATE
    for placeholder, value in values.items():
        text = text.replace(placeholder, value)
    return text
