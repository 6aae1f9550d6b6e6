"""roles.tf: the VM role's read access to exactly the secrets `runtime` references.

The references live in one place, `local.runtime` (inputs.runtime.tf): the grants are derived from it in
HCL, so editing a reference there changes the policy with it. Nothing here reads a value: the secrets'
ARNs come from `data "aws_secretsmanager_secret"` (metadata: name, ARN, KMS key id), a parameter's ARN is
built from the account and region, and a customer KMS key's ARN from `data "aws_kms_key"`. The VM reads
the values itself, with this role.
"""

from __future__ import annotations

from vmplane.clouds.aws.secret_policy import POLICY_NAME  # the direct pipeline's name for the same policy
from vmplane.envspec.models import EnvSpec
from vmplane.envspec.secrets import SecretStore, secret_refs
from vmplane.tf.aws.common import E
from vmplane.tf.aws.schedules import scheduled_modes
from vmplane.tf.hcl import Block, Comment, Item
from vmplane.tf.inputs import SECRET_REFS

ACCOUNT = "data.aws_caller_identity.current.account_id"
PARTITION = "data.aws_partition.current.partition"
REGION = "local.identity.provider.region"


SSM_ARN = f"arn:${{{PARTITION}}}:ssm:${{{REGION}}}:${{{ACCOUNT}}}:parameter/"
VIA = f"secretsmanager.${{{REGION}}}.${{data.aws_partition.current.dns_suffix}}"
# The references (field path -> text); each AWS secret ("aws-sm:NAME" / "aws-ssm:/path", without its
# #key or pinned version) with the fields that reference it, in field order: a secret referenced twice
# is granted once. The Sids are the direct pipeline's (clouds/aws/secret_policy.py `sid`), from a secret's
# first field: runtime.env.DB_PASSWORD -> EnvDBPASSWORD + 8 hex of the field's sha256, so they stay put.
# The statements follow the secrets' first fields, then one kms:Decrypt per customer key.
SECRET_LOCALS = {
    "secret_refs": SECRET_REFS,
    "secret_fields": (
        "{\n"
        '    for f, r in local.secret_refs : regex("^(aws-sm:[^#]+|aws-ssm:[^:]+)", r)[0] => f...\n'
        '    if startswith(r, "aws-")\n'
        "  }"
    ),
    "first_fields": "{ for k, fs in local.secret_fields : fs[0] => k }",
    "sid_words": (
        "{\n"
        '    for f in keys(local.secret_refs) : f => substr(join("", [\n'
        '      for w in regexall("[A-Za-z0-9]+", trimprefix(f, "runtime.")) :'
        ' "${upper(substr(w, 0, 1))}${substr(w, 1, -1)}"\n'
        "    ]), 0, 48)\n"
        "  }"
    ),
    "sm_secrets": 'toset([for k in keys(local.secret_fields) : trimprefix(k, "aws-sm:") if startswith(k, "aws-sm:")])',
    "secret_arns": (
        "merge(\n"
        '    { for n, s in data.aws_secretsmanager_secret.ref : "aws-sm:${n}" => s.arn },\n'
        "    {\n"
        "      for k in keys(local.secret_fields) :\n"
        f'      k => "{SSM_ARN}${{trimprefix(k, "aws-ssm:/")}}" if startswith(k, "aws-ssm:")\n'
        "    },\n"
        "  )"
    ),
    "kms_fields": (
        "{\n"
        "    for n, s in data.aws_secretsmanager_secret.ref :\n"
        '    s.kms_key_id => local.secret_fields["aws-sm:${n}"][0]... if s.kms_key_id != ""\n'
        "  }"
    ),
    "secret_statements": (
        "concat(\n"
        "    [for f, k in local.first_fields : {\n"
        '      Sid      = "${local.sid_words[f]}${substr(sha256(f), 0, 8)}"\n'
        '      Effect   = "Allow"\n'
        '      Action   = startswith(k, "aws-sm:") ? "secretsmanager:GetSecretValue" : "ssm:GetParameter"\n'
        "      Resource = local.secret_arns[k]\n"
        "    }],\n"
        "    [for f, key in { for key, fs in local.kms_fields : sort(fs)[0] => key } : {\n"
        '      Sid       = "${local.sid_words[f]}Kms${substr(sha256(f), 0, 8)}"\n'
        '      Effect    = "Allow"\n'
        '      Action    = "kms:Decrypt"\n'
        "      Resource  = data.aws_kms_key.secret[key].arn\n"
        f'      Condition = {{ StringEquals = {{ "kms:ViaService" = "{VIA}" }} }}\n'
        "    }],\n"
        "  )"
    ),
}


def has_aws_secrets(spec: EnvSpec) -> bool:
    return any(r.store in (SecretStore.aws_sm, SecretStore.aws_ssm) for r in secret_refs(spec).values())


def secrets_tf(spec: EnvSpec) -> list[Item]:
    """The grant blocks; none at all without a reference (the role keeps the exec channel only)."""
    if not has_aws_secrets(spec):
        return []
    loc = Block("locals")
    for name, expr in SECRET_LOCALS.items():
        loc.attr(name, E(expr))
    sm = Block("data", ["aws_secretsmanager_secret", "ref"])
    sm.attr("for_each", E("local.sm_secrets"))
    sm.comment("Metadata only (ARN, KMS key id): this data source never reads the secret's value.")
    sm.attr("arn", E('startswith(each.key, "arn:") ? each.key : null'))
    sm.attr("name", E('startswith(each.key, "arn:") ? null : each.key'))
    kms = Block("data", ["aws_kms_key", "secret"])
    kms.comment("A secret under a customer key: the VM decrypts through Secrets Manager only (kms:ViaService).")
    kms.attr("for_each", E("toset(keys(local.kms_fields))"))
    kms.attr("key_id", E("each.key"))
    policy = Block("resource", ["aws_iam_role_policy", "secrets"])
    policy.attr("name", POLICY_NAME)
    policy.attr("role", E("aws_iam_role.vm.id"))
    policy.attr(
        "policy", E('jsonencode({\n    Version   = "2012-10-17"\n    Statement = local.secret_statements\n  })')
    )
    items: list[Item] = [
        Comment(
            "The VMs read their own secrets: one statement per referenced secret (GetSecretValue on its ARN,\n"
            "GetParameter on the parameter's), kms:Decrypt on a secret's customer key. A SecureString under a\n"
            "customer key also needs kms:Decrypt on that key: Terraform cannot read which key without reading\n"
            "the parameter, so add that statement in your own .tf file (the default aws/ssm key needs none)."
        ),
        loc,
        sm,
        kms,
        policy,
    ]
    if "fixed" not in scheduled_modes(spec):  # else the scheduler's role declared them already
        items += [Block("data", ["aws_caller_identity", "current"]), Block("data", ["aws_partition", "current"])]
    return items
