"""roles.tf: the VM role's read access to exactly the secrets `runtime` references.

The references live in one place, `local.runtime` (inputs.runtime.tf): the grants are derived from it in
HCL, so editing a reference there changes the policy with it. Nothing here reads a value: the secrets'
ARNs come from `data "aws_secretsmanager_secret"` (metadata: name, ARN, KMS key id), a parameter's ARN is
built from the account and region, and a customer KMS key's ARN from `data "aws_kms_key"`. The VM reads
the values itself, with this role.
"""

from __future__ import annotations

from vmplane.envspec.models import EnvSpec
from vmplane.envspec.secrets import SecretStore, secret_refs
from vmplane.tf.aws.common import E
from vmplane.tf.aws.schedules import scheduled_modes
from vmplane.tf.hcl import Block, Comment, Item
from vmplane.tf.inputs import SECRET_REFS, store_names

POLICY_NAME = "vmplane-read-secrets"
ACCOUNT = "data.aws_caller_identity.current.account_id"
PARTITION = "data.aws_partition.current.partition"
REGION = "local.identity.provider.region"


# Field path -> reference text, then the names per store; a secret referenced twice is granted once.
# The Sids end in a hash of the name, so adding or removing one secret leaves the others' Sids alone.
SECRET_LOCALS = {
    "secret_refs": SECRET_REFS,
    "sm_secrets": store_names("aws-sm", "#"),
    "ssm_parameters": store_names("aws-ssm", ":"),
    "secret_statements": (
        "concat(\n"
        "    [for n in sort(local.sm_secrets) : {\n"
        '      Sid      = "ReadSecret${substr(sha1(n), 0, 16)}"\n'
        '      Effect   = "Allow"\n'
        '      Action   = "secretsmanager:GetSecretValue"\n'
        "      Resource = data.aws_secretsmanager_secret.ref[n].arn\n"
        "    }],\n"
        "    [for n in sort(local.ssm_parameters) : {\n"
        '      Sid      = "ReadParameter${substr(sha1(n), 0, 16)}"\n'
        '      Effect   = "Allow"\n'
        '      Action   = "ssm:GetParameter"\n'
        f'      Resource = "arn:${{{PARTITION}}}:ssm:${{{REGION}}}:${{{ACCOUNT}}}:parameter${{n}}"\n'
        "    }],\n"
        "    [for n in sort(keys(data.aws_kms_key.secret)) : {\n"
        '      Sid      = "DecryptSecret${substr(sha1(n), 0, 16)}"\n'
        '      Effect   = "Allow"\n'
        '      Action   = "kms:Decrypt"\n'
        "      Resource = data.aws_kms_key.secret[n].arn\n"
        "      Condition = {\n"
        f'        StringEquals = {{ "kms:ViaService" = "secretsmanager.${{{REGION}}}.amazonaws.com" }}\n'
        "      }\n"
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
    kms.attr(
        "for_each", E('{ for n, s in data.aws_secretsmanager_secret.ref : n => s.kms_key_id if s.kms_key_id != "" }')
    )
    kms.attr("key_id", E("each.value"))
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
