"""template.yaml as CloudFormation deploys it, without AWS: SAM's own translator applies the transform,
then conditions and intrinsics are resolved for a given set of parameters. Also cfn-lint per shape.

`python -m tests.template` lints both database shapes (what `make validate` runs).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

TEMPLATE = Path(__file__).resolve().parents[1] / "template.yaml"
PSEUDO = {
    "AWS::Partition": "aws",
    "AWS::Region": "us-east-1",
    "AWS::AccountId": "123456789012",
    "AWS::StackName": "retrieval-test",
    "AWS::URLSuffix": "amazonaws.com",
}
NO_VALUE = object()

# What the tests deploy with: the parameters a user would pass to `sam deploy`. This is the
# bring-your-own-database shape, the one the build tests invoke handlers in.
PARAMETERS = {
    "CreateDatabase": "false",
    "SubnetIds": "subnet-0a1b2c3d",
    "SecurityGroupIds": "sg-0a1b2c3d",
    "DatabaseHost": "rag-proxy.proxy-abc123.us-east-1.rds.amazonaws.com",
    "EmbeddingProvider": "openai",
    "EmbeddingModel": "all-MiniLM-L6-v2",
    "EmbeddingDimension": "384",
}
SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:retrieval/db-AbCdEf"
API_KEY_SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:retrieval/api-keys-XyZ123"


def shape(create_database: bool) -> dict[str, str]:
    """The parameters of a deployable stack of either database shape (authenticated by an API key)."""
    common = {"ApiKeySecretArn": API_KEY_SECRET_ARN}
    if create_database:
        created = {"CreateDatabase": "true", "DatabaseHost": "", "SubnetIds": "", "SecurityGroupIds": ""}
        return PARAMETERS | common | created
    return PARAMETERS | common | {"DatabaseSecretArn": SECRET_ARN}


class Conditions:
    """Evaluates the template's Conditions and resolves Ref / Fn::If as CloudFormation would."""

    def __init__(self, definitions: dict[str, Any], params: dict[str, str]) -> None:
        self._definitions = definitions
        self._params = {**PSEUDO, **params}
        self._cache: dict[str, bool] = {}

    def holds(self, name: str) -> bool:
        if name not in self._cache:
            self._cache[name] = self._evaluate(self._definitions[name])
        return self._cache[name]

    def _evaluate(self, expression: Any) -> bool:
        ((function, args),) = expression.items()
        if function == "Fn::Equals":
            return bool(self.resolve(args[0]) == self.resolve(args[1]))
        if function == "Fn::Not":
            return not self._evaluate(args[0])
        if function == "Fn::And":
            return all(self._evaluate(arg) for arg in args)
        if function == "Fn::Or":
            return any(self._evaluate(arg) for arg in args)
        if function == "Condition":
            return self.holds(args)
        raise AssertionError(f"unsupported condition function {function}")

    def resolve(self, value: Any) -> Any:
        if isinstance(value, dict) and len(value) == 1:
            ((function, args),) = value.items()
            if function == "Ref":
                return NO_VALUE if args == "AWS::NoValue" else self._params[args]
            if function == "Fn::If":
                condition, when_true, when_false = args
                return self.resolve(when_true if self.holds(condition) else when_false)
            if function == "Condition":
                return self.holds(args)
            if function == "Fn::Join":
                separator, items = args
                resolved = self.resolve(items)
                # A CommaDelimitedList parameter is given here as its comma-separated string.
                parts = (
                    resolved.split(",") if isinstance(resolved, str) else [self.resolve(i) for i in resolved]
                )
                return separator.join(str(part) for part in parts)
            if function == "Fn::Select":
                index, items = args
                return self.resolve(items)[int(index)]
            if function == "Fn::Split":
                separator, text = args
                return str(self.resolve(text)).split(separator)
            if function == "Fn::Sub" and isinstance(args, str):
                return re.sub(
                    r"\$\{([^}!]+)\}", lambda m: str(self._params.get(m.group(1), m.group(0))), args
                )
            raise AssertionError(f"unsupported intrinsic {function} in an environment variable")
        return value


class _ManagedPolicies:
    """The AWS managed policies the transform may attach, by name (normally looked up through IAM)."""

    def load(self) -> dict[str, str]:
        service_role = "arn:aws:iam::aws:policy/service-role"
        return {
            "AWSLambdaBasicExecutionRole": f"{service_role}/AWSLambdaBasicExecutionRole",
            "AWSLambdaVPCAccessExecutionRole": f"{service_role}/AWSLambdaVPCAccessExecutionRole",
            "AWSXrayWriteOnlyAccess": "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess",
        }


@contextmanager
def _region() -> Iterator[None]:
    """The translator looks the region up in the environment."""
    before = os.environ.get("AWS_DEFAULT_REGION")
    os.environ["AWS_DEFAULT_REGION"] = PSEUDO["AWS::Region"]
    try:
        yield
    finally:
        if before is None:
            del os.environ["AWS_DEFAULT_REGION"]
        else:
            os.environ["AWS_DEFAULT_REGION"] = before


def source() -> dict[str, Any]:
    """template.yaml as written (before the SAM transform)."""
    from samtranslator.yaml_helper import yaml_parse

    parsed: dict[str, Any] = yaml_parse(TEMPLATE.read_text())
    return parsed


@cache
def _transformed() -> str:
    """The SAM transform's output as JSON (parameters play no part in it, so it is done once)."""
    from samtranslator.translator.transform import transform

    template = source()
    for resource in template["Resources"].values():
        props = resource.get("Properties", {})
        for key in ("CodeUri", "ContentUri"):
            if key in props:  # folders until `sam package` uploads them; the transform wants S3 URIs
                props[key] = f"s3://artifacts/{props[key].strip('/')}.zip"
    with _region():
        output = transform(template, {}, _ManagedPolicies())
    return json.dumps(output)


def defaults() -> dict[str, str]:
    return {name: str(spec["Default"]) for name, spec in source()["Parameters"].items() if "Default" in spec}


@dataclass(frozen=True)
class Deployment:
    resources: dict[str, Any]
    outputs: dict[str, Any]


def deploy(parameters: dict[str, str]) -> Deployment:
    """Resources and outputs of the transformed template deployed with PARAMETERS | `parameters`:
    only those whose condition holds, with every Fn::If, Ref to a parameter and Fn::Sub resolved."""
    output = json.loads(_transformed())
    values = defaults() | PARAMETERS | parameters
    conditions = Conditions(output.get("Conditions", {}), values)

    def kept(section: dict[str, Any]) -> dict[str, Any]:
        resolved: dict[str, Any] = deep_resolve(section, conditions, values)
        return {
            name: item
            for name, item in resolved.items()
            if "Condition" not in item or conditions.holds(item["Condition"])
        }

    return Deployment(kept(output["Resources"]), kept(output.get("Outputs", {})))


def deployed(parameters: dict[str, str]) -> dict[str, Any]:
    """Resources of the transformed template with every Fn::If, Ref and Fn::Sub resolved."""
    return deploy(parameters).resources


def _substitute(text: str, names: dict[str, Any]) -> str:
    return re.sub(
        r"\$\{([^}!]+)\}",
        lambda m: names[m.group(1)] if isinstance(names.get(m.group(1)), str) else m.group(0),
        text,
    )


class Attribute(str):
    """A Fn::GetAtt, known once deployed: stands as "Resource.Attribute"."""


def deep_resolve(value: Any, conditions: Conditions, values: dict[str, str]) -> Any:
    """Resolves what is known before deployment. A Ref to a resource stays {"Ref": name}; a GetAtt
    becomes "Resource.Attribute", and a Select of a Split of one
    "Select(i, Split('s', Resource.Attribute))"."""
    names = {**values, **PSEUDO}
    if isinstance(value, dict):
        if len(value) == 1:
            ((function, args),) = value.items()
            if function == "Fn::If":
                condition, when_true, when_false = args
                chosen = when_true if conditions.holds(condition) else when_false
                return deep_resolve(chosen, conditions, values)
            if function == "Ref" and (args == "AWS::NoValue" or args in names):
                return NO_VALUE if args == "AWS::NoValue" else names[args]
            if function == "Fn::GetAtt":
                return Attribute(".".join(args) if isinstance(args, list) else args)
            if function == "Fn::Sub":
                if isinstance(args, str):
                    return _substitute(args, names)
                text, variables = args
                variables = deep_resolve(variables, conditions, values)
                substituted = _substitute(text, {**names, **variables})
                unresolved = {key: item for key, item in variables.items() if not isinstance(item, str)}
                return {"Fn::Sub": [substituted, unresolved]} if unresolved else substituted
            if function == "Fn::Split":
                separator, text = deep_resolve(args, conditions, values)
                if isinstance(text, str) and not isinstance(text, Attribute):
                    return text.split(separator)
                return {"Fn::Split": [separator, text]}
            if function == "Fn::Select":
                index, items = deep_resolve(args, conditions, values)
                if isinstance(items, list):
                    return items[int(index)]
                split = items.get("Fn::Split") if isinstance(items, dict) else None
                if split is not None and isinstance(split[1], Attribute):
                    return f"Select({index}, Split('{split[0]}', {split[1]}))"
                return {"Fn::Select": [index, items]}
            if function == "Fn::Join":
                separator, items = deep_resolve(args, conditions, values)
                if isinstance(items, list) and all(isinstance(item, str) for item in items):
                    return separator.join(items)
                return {"Fn::Join": [separator, items]}
        resolved = {key: deep_resolve(item, conditions, values) for key, item in value.items()}
        return {key: item for key, item in resolved.items() if item is not NO_VALUE}
    if isinstance(value, list):
        items = [deep_resolve(item, conditions, values) for item in value]
        return [item for item in items if item is not NO_VALUE]
    return value


def role_statements(resources: dict[str, Any], role: str) -> list[dict[str, Any]]:
    """The statements a role is granted: its inline policies and the template's managed policies
    attached to it (AWS managed policies, attached by ARN, are not expanded)."""
    props = resources[role]["Properties"]
    statements = [
        statement
        for policy in props.get("Policies", [])
        for statement in policy["PolicyDocument"]["Statement"]
    ]
    for arn in props.get("ManagedPolicyArns", []):
        if isinstance(arn, str):
            continue
        name = arn["Ref"]
        assert name in resources, f"{role} attaches {name}, which this deployment does not create"
        assert resources[name]["Type"] == "AWS::IAM::ManagedPolicy", name
        statements += resources[name]["Properties"]["PolicyDocument"]["Statement"]
    return statements


def aws_managed_policies(resources: dict[str, Any], role: str) -> set[str]:
    """Names of the AWS managed policies attached to a role."""
    return {
        arn.rsplit("/", 1)[1]
        for arn in resources[role]["Properties"].get("ManagedPolicyArns", [])
        if isinstance(arn, str)
    }


def resource_key(resource: Any) -> str:
    """A policy Resource as a string: itself, or the JSON of what stays unresolved ({"Ref": ...})."""
    return resource if isinstance(resource, str) else json.dumps(resource, sort_keys=True)


def grants(statements: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(action, resource) pairs allowed; a statement may list several of either."""
    found = set()
    for statement in statements:
        if statement["Effect"] == "Allow":
            actions, targets = (
                value if isinstance(value, list) else [value]
                for value in (statement["Action"], statement["Resource"])
            )
            found |= {(action, resource_key(target)) for action in actions for target in targets}
    return found


def rules_refusing(parameters: dict[str, str]) -> set[str]:
    """The AssertDescriptions of the Rules that `parameters` break: CloudFormation refuses those."""
    template = source()
    values = defaults() | PARAMETERS | parameters
    refused = set()
    for rule in template["Rules"].values():
        always = {"Fn::Equals": ["", ""]}
        if not Conditions({"when": rule.get("RuleCondition", always)}, values).holds("when"):
            continue
        for assertion in rule["Assertions"]:
            if not Conditions({"assert": assertion["Assert"]}, values).holds("assert"):
                refused.add(" ".join(assertion["AssertDescription"].split()))
    return refused


def lint(parameters: dict[str, str]) -> list[str]:
    """cfn-lint's findings (errors and warnings, as its command line reports them) on template.yaml
    deployed with `parameters`. cfn-lint resolves a Ref to a parameter through its Default, and its
    --parameters option is lost when it applies the SAM transform (1.x): the values become Defaults."""
    from cfnlint.api import ManualArgs
    from cfnlint.api import lint as run_cfn_lint
    from cfnlint.decode import decode

    template, errors = decode(str(TEMPLATE))
    assert template is not None and not errors, errors
    for name, value in parameters.items():
        template["Parameters"][name]["Default"] = value
    matches = run_cfn_lint(json.dumps(template), config=ManualArgs(regions=[PSEUDO["AWS::Region"]]))
    return [f"{match.rule.id} {match.message} ({'/'.join(map(str, match.path))})" for match in matches]


if __name__ == "__main__":
    failed = False
    for name, create in (("created database", True), ("your database", False)):
        findings = lint(shape(create))
        print(f"cfn-lint, {name}: {len(findings)} finding(s)")
        for finding in findings:
            print(f"  {finding}")
        failed = failed or bool(findings)
    sys.exit(1 if failed else 0)
