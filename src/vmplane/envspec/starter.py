"""A commented starter spec file: the quickest way to a valid environment that explains itself."""

from __future__ import annotations

import json
import re

from vmplane.envspec.models import DNS_LABEL
from vmplane.envspec.provider import SPECS

_DNS_LABEL_RE = re.compile(DNS_LABEL)

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


def render_starter(
    name: str,
    org: str,
    region: str | None = None,
    *,
    cloud: str | None = None,
    project: str = "my-gcp-project",
) -> str:
    """Render a starter JSONC spec with one fixed pool of 2 VMs; raises ValueError on bad input.
    `cloud` defaults to the first registered one, `region` per cloud (some have none); `project` is
    substituted where the cloud's provider text asks for one."""
    starters = {name: s.starter for name, s in SPECS.items() if s.starter is not None}
    chosen = str(cloud) if cloud is not None else next(iter(starters))
    cloud_spec = SPECS.get(chosen)
    starter = starters.get(chosen)
    if cloud_spec is None or starter is None:
        raise ValueError(f"no starter for {chosen} (choose {', '.join(starters)})")
    for label, value in (("name", name), ("org", org)):
        if not _DNS_LABEL_RE.fullmatch(value):
            raise ValueError(
                f"{label} {value!r} is not a DNS label: use 1-32 lowercase letters, digits or '-', "
                "starting with a letter and not ending with '-'"
            )
    region = region if region is not None else starter.default_region
    if (problem := starter.check(region, project)) is not None:
        raise ValueError(problem)
    cert = cloud_spec.cert_source
    lb = _LB.replace("__CERT__", json.dumps(cert.value)) if cert else f"  // {chosen} has no managed load balancer."
    values = {
        "__TITLE__": f"{name!r} of organisation {org!r}",
        "__SANDBOX_HINT__": starter.sandbox_hint,
        "__PROVIDER__": starter.provider,
        "__NETWORK__": starter.network,
        "__MACHINE__": starter.machine,
        "__EXEC__": json.dumps(cloud_spec.exec_mode.value),
        "__LOAD_BALANCER__": lb,
        "__SECRET_ENV__": json.dumps(starter.secrets[0]),
        "__SECRET_FILE__": json.dumps(starter.secrets[1]),
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
