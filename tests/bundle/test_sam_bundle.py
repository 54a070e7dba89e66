"""The deployable bundle: `sam build`, then every built handler imported and invoked the way Lambda does.

Lambda puts the function folder and the layer's `python/` on sys.path and nothing else of ours, runs
python3.12 on x86_64, and passes the template's environment. Docker (and so `sam local invoke`) is not
available here, so each built handler runs in a fresh python3.12 with exactly that sys.path, the
template's environment variables resolved as CloudFormation would, and events/*.json as input. The
layer carries no torch, so the retrieve function embeds through EMBEDDING_PROVIDER=openai, pointed at
a local fake OpenAI-compatible server that answers with the real local model's embeddings.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EVENTS_DIR, REPO_ROOT
from tests.fakes.http import FakeHTTPServer, RecordedRequest, Reply

pytestmark = pytest.mark.bundle

BUILD_DIR = REPO_ROOT / ".aws-sam" / "build"
SAM = Path(sys.executable).parent / "sam"
MIB = 1024 * 1024
LAMBDA_HARD_LIMIT_BYTES = 250 * MIB  # function code plus all layers, unzipped (AWS's "250 MB")
LAYER_SIZE_TARGET_BYTES = 60 * MIB
ELF_MACHINES = {"x86_64": 62, "arm64": 183}
WHEEL_PLATFORMS = {"x86_64": "x86_64", "arm64": "aarch64"}
NO_VALUE = object()

# What the test deploys with: the parameters a user would pass to `sam deploy`.
PARAMETERS = {
    "SubnetIds": "subnet-0a1b2c3d",
    "SecurityGroupIds": "sg-0a1b2c3d",
    "DatabaseHost": "rag-proxy.proxy-abc123.us-east-1.rds.amazonaws.com",
    "EmbeddingProvider": "openai",
    "EmbeddingModel": "all-MiniLM-L6-v2",
    "EmbeddingDimension": "384",
}


def find_python312() -> str | None:
    """A working python3.12: on PATH, else from pyenv (whose shim may exist but refuse to run)."""
    candidates = [shutil.which("python3.12")]
    pyenv_root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    candidates += sorted(glob.glob(f"{pyenv_root}/versions/3.12.*/bin/python3.12"), reverse=True)
    for candidate in candidates:
        if candidate and subprocess.run([candidate, "-c", ""], capture_output=True).returncode == 0:
            return candidate
    return None


@dataclass(frozen=True)
class BuiltFunction:
    """One function of the built template, with what Lambda would give it."""

    name: str
    code_dir: Path
    handler: str
    layer_dirs: tuple[Path, ...]
    variables: dict[str, Any]  # Globals plus the function's, before intrinsics are resolved
    conditions: dict[str, Any]
    defaults: dict[str, str]
    routes: frozenset[str]
    architecture: str

    def environment(self, parameters: dict[str, str]) -> dict[str, str]:
        """The variables as CloudFormation sets them when deployed with `parameters`."""
        resolver = Conditions(self.conditions, self.defaults | parameters)
        resolved = {key: resolver.resolve(raw) for key, raw in self.variables.items()}
        return {key: str(value) for key, value in resolved.items() if value is not NO_VALUE}


@dataclass(frozen=True)
class Bundle:
    python: str
    functions: tuple[BuiltFunction, ...]
    layer_dirs: tuple[Path, ...]


@pytest.fixture(scope="session")
def bundle() -> Bundle:
    """`sam build --cached` (dependencies cached under .aws-sam), then the built template read back."""
    python = find_python312()
    if python is None:
        pytest.skip("sam build for python3.12 needs a python3.12 and none was found (PATH or pyenv)")
    env = {
        **os.environ,
        "PATH": f"{Path(python).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "SAM_CLI_TELEMETRY": "0",
        "AWS_DEFAULT_REGION": os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
    }
    proc = subprocess.run(
        [str(SAM), "build", "--cached"], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return read_built_template(python)


def read_built_template(python: str) -> Bundle:
    from samtranslator.yaml_helper import yaml_parse

    template = yaml_parse((BUILD_DIR / "template.yaml").read_text())
    resources = template["Resources"]
    globals_fn = template.get("Globals", {}).get("Function", {})
    defaults = {
        name: str(spec["Default"]) for name, spec in template["Parameters"].items() if "Default" in spec
    }

    functions = []
    for name, resource in resources.items():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        props = {**globals_fn, **resource["Properties"]}
        variables = {
            **globals_fn.get("Environment", {}).get("Variables", {}),
            **resource["Properties"].get("Environment", {}).get("Variables", {}),
        }
        layer_dirs = tuple(
            BUILD_DIR / resources[ref["Ref"]]["Properties"]["ContentUri"] for ref in props["Layers"]
        )
        routes = frozenset(
            f"{event['Properties']['Method'].upper()} {event['Properties']['Path']}"
            for event in props.get("Events", {}).values()
            if event["Type"] == "HttpApi"
        )
        functions.append(
            BuiltFunction(
                name=name,
                code_dir=BUILD_DIR / props["CodeUri"],
                handler=props["Handler"],
                layer_dirs=layer_dirs,
                variables=variables,
                conditions=template.get("Conditions", {}),
                defaults=defaults,
                routes=routes,
                architecture=props["Architectures"][0],
            )
        )
    layers = tuple(
        BUILD_DIR / r["Properties"]["ContentUri"]
        for r in resources.values()
        if r["Type"] == "AWS::Serverless::LayerVersion"
    )
    return Bundle(python=python, functions=tuple(functions), layer_dirs=layers)


class Conditions:
    """Evaluates the template's Conditions and resolves Ref / Fn::If as CloudFormation would."""

    def __init__(self, definitions: dict[str, Any], params: dict[str, str]) -> None:
        self._definitions = definitions
        self._params = params
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
            raise AssertionError(f"unsupported intrinsic {function} in an environment variable")
        return value


class RealModelEmbeddings(FakeHTTPServer):
    """OpenAI-compatible `POST /v1/embeddings` answered with the real local model's vectors."""

    def __init__(self, embed: Callable[[list[str]], list[list[float]]]) -> None:
        super().__init__()
        self._embed = embed
        self.add_route("POST", r"(?:/v1)?/embeddings", self._embeddings)

    @property
    def base_url(self) -> str:
        """The value for the OpenAIBaseUrl parameter."""
        return f"{self.url}/v1"

    def _embeddings(self, request: RecordedRequest, match: re.Match[str]) -> Reply:
        body = request.json()
        inputs = body["input"]
        texts = [inputs] if isinstance(inputs, str) else list(inputs)
        data = [
            {"object": "embedding", "index": i, "embedding": vector}
            for i, vector in enumerate(self._embed(texts))
        ]
        usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
        return Reply(200, {"object": "list", "data": data, "model": body["model"], "usage": usage})


@pytest.fixture(scope="module")
def embeddings_server(service: Any) -> Iterator[RealModelEmbeddings]:
    with RealModelEmbeddings(lambda texts: service.embedder.embed(texts, "query")) as server:
        yield server


# Runs inside the isolated python3.12: only the standard library is importable besides our two folders.
DRIVER = textwrap.dedent(
    """
    import importlib, json, os, sys, time

    function_dir, layer_dir, handler_spec, events_file, results_file = sys.argv[1:6]
    ours = [p for p in sys.path if not p.startswith(sys.base_prefix)]
    if ours != [function_dir, layer_dir]:
        raise SystemExit(f"sys.path is not isolated: {sys.path}")

    class Context:
        function_name = os.environ["AWS_LAMBDA_FUNCTION_NAME"]
        function_version = "1"
        memory_limit_in_mb = int(os.environ["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"])
        invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:{function_name}:live"
        aws_request_id = "c6af9ac6-7b61-11e6-9a41-93e812345678"
        log_group_name = f"/aws/lambda/{function_name}"
        log_stream_name = "2025/11/22/[1]abcdef0123456789"

        def get_remaining_time_in_millis(self):
            return 29000

    started = time.perf_counter()
    module_name, attribute = handler_spec.rsplit(".", 1)
    handler = getattr(importlib.import_module(module_name), attribute)
    import_seconds = time.perf_counter() - started
    modules_at_import = sorted(sys.modules)
    responses = []
    for path in json.loads(open(events_file).read()):
        event = json.loads(open(path).read())
        # Lambda sets the trace header per invocation.
        trace = event["headers"]["x-amzn-trace-id"]
        os.environ["_X_AMZN_TRACE_ID"] = f"{trace};Parent=53995c3f42cd8ad8;Sampled=1"
        responses.append(handler(event, Context()))
    result = {
        "import_seconds": import_seconds,
        "modules_at_import": modules_at_import,
        "modules_after": sorted(sys.modules),
        "responses": responses,
    }
    with open(results_file, "w") as out:
        json.dump(result, out)
    """
)


@dataclass
class Invocation:
    responses: list[dict[str, Any]]
    modules_at_import: list[str]
    modules_after: list[str]
    output: str


def invoke_built(
    bundle: Bundle,
    function: BuiltFunction,
    events: list[Path],
    parameters: dict[str, str],
    extra_env: dict[str, str],
    tmp_path: Path,
) -> Invocation:
    events_file = tmp_path / f"{function.name}-events.json"
    results_file = tmp_path / f"{function.name}-results.json"
    events_file.write_text(json.dumps([str(e) for e in events]))
    (layer_dir,) = function.layer_dirs
    python_path = [str(function.code_dir), str(layer_dir / "python")]
    env = {
        **function.environment(parameters),
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": os.pathsep.join(python_path),
        "PYTHONDONTWRITEBYTECODE": "1",
        "AWS_LAMBDA_FUNCTION_NAME": function.name,
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        # Lambda sets LAMBDA_TASK_ROOT; with it, Powertools turns X-Ray tracing on.
        "LAMBDA_TASK_ROOT": str(function.code_dir),
        **extra_env,
    }
    # -S: no site-packages; -s: no user site; -P: the cwd is not prepended. PYTHONPATH is the whole path.
    proc = subprocess.run(
        [
            bundle.python,
            "-S",
            "-s",
            "-P",
            "-c",
            DRIVER,
            *python_path,
            function.handler,
            str(events_file),
            str(results_file),
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(results_file.read_text())
    return Invocation(
        result["responses"], result["modules_at_import"], result["modules_after"], proc.stdout + proc.stderr
    )


def events_for(function: BuiltFunction) -> list[Path]:
    return [
        path
        for path in sorted(EVENTS_DIR.glob("*.json"))
        if json.loads(path.read_text())["routeKey"] in function.routes
    ]


def body(response: dict[str, Any]) -> dict[str, Any]:
    assert response["isBase64Encoded"] is False
    assert response["headers"]["content-type"] == "application/json"
    parsed: dict[str, Any] = json.loads(response["body"])
    return parsed


def top_document(b: dict[str, Any]) -> str:
    document: str = b["results"][0]["metadata"]["documentId"]
    return document


# What a user sees for each event, from the built bundle.
EXPECTED: dict[str, tuple[int, Callable[[dict[str, Any]], bool]]] = {
    "retrieve.json": (
        200,
        lambda b: (
            top_document(b) == "k8s-scheduling"
            and b["results"][0]["metadata"]["fileName"] == "k8s-docs.pdf"
            and all(r["score"] >= 0.3 for r in b["results"])
        ),
    ),
    "retrieve-metadata-filter.json": (
        200,
        lambda b: (
            top_document(b) == "hvac-cold-complaints"
            and {r["metadata"]["project_name"] for r in b["results"]} == {"Facilities"}
        ),
    ),
    "retrieve-invalid-grade.json": (422, lambda b: b["error"]["details"]["errors"][0]["field"] == "grade"),
    "retrieve-unknown-store.json": (
        404,
        lambda b: b["error"]["code"] == "store_not_found" and "does-not-exist" in b["error"]["message"],
    ),
    "similarity-search.json": (
        200,
        lambda b: (
            top_document(b) == "k8s-scheduling" and b["totalResults"] == 3 and b["results"][0]["score"] > 0.5
        ),
    ),
    "similarity-search-wrong-dimension.json": (
        422,
        lambda b: (
            b["error"]["code"] == "dimension_mismatch"
            and "768" in b["error"]["message"]
            and "384" in b["error"]["message"]
        ),
    ),
    "health.json": (200, lambda b: b == {"status": "ok", "database": "ok"}),
}


def test_sam_build_puts_the_core_at_python_retrieval_core_without_torch_or_boto3(bundle: Bundle) -> None:
    (layer,) = bundle.layer_dirs
    package = layer / "python" / "retrieval_core"
    assert (package / "__init__.py").is_file()
    assert (package / "api" / "lambda_handler.py").is_file()
    assert (package / "db" / "credentials.py").is_file()
    assert (package / "sample_corpus.jsonl").is_file()
    shipped = {p.name for p in (layer / "python").iterdir()}
    for absent in (
        "torch",
        "sentence_transformers",
        "transformers",
        "boto3",
        "pytest",
        "moto",
        "mypy",
        "numpy",
    ):
        assert absent not in shipped, f"{absent} must not be in the layer"
    for present in (
        "fastapi",
        "mangum",
        "psycopg",
        "psycopg_binary",
        "pgvector",
        "aws_lambda_powertools",
        "aws_xray_sdk",
        "httpx",
        "pydantic_settings",
    ):
        assert present in shipped, f"{present} is missing from the layer"
    assert (layer / "python" / "google" / "genai").is_dir()


def test_layer_fits_lambda_and_reports_its_size(bundle: Bundle) -> None:
    (layer,) = bundle.layer_dirs
    size = sum(f.stat().st_size for f in layer.rglob("*") if f.is_file())
    code = max(
        sum(f.stat().st_size for f in fn.code_dir.rglob("*") if f.is_file()) for fn in bundle.functions
    )
    # Reported, not asserted: the 60 MiB target is missed while the X-Ray SDK drags botocore in (see docs).
    print(f"\nlayer unzipped: {size / MIB:.1f} MiB (target {LAYER_SIZE_TARGET_BYTES / MIB:.0f} MiB)")
    assert size + code < LAMBDA_HARD_LIMIT_BYTES


def test_binary_wheels_match_the_template_architecture(bundle: Bundle) -> None:
    (function_architecture,) = {fn.architecture for fn in bundle.functions}
    (layer,) = bundle.layer_dirs
    python_dir = layer / "python"
    shared_objects = [p for p in python_dir.rglob("*.so*") if p.is_file() and ".so" in p.name]
    assert len(shared_objects) >= 5  # pydantic_core, psycopg_binary and its libs, cryptography, ...
    for path in shared_objects:
        with path.open("rb") as f:
            header = f.read(20)
        assert header[:4] == b"\x7fELF", path
        assert header[4] == 2, f"{path} is not 64-bit"
        byte_order = "<" if header[5] == 1 else ">"
        (machine,) = struct.unpack(f"{byte_order}H", header[18:20])
        assert machine == ELF_MACHINES[function_architecture], (
            f"{path.relative_to(python_dir)}: e_machine {machine}"
        )

    platform_word = WHEEL_PLATFORMS[function_architecture]
    wheels = list(python_dir.glob("*.dist-info/WHEEL"))
    assert wheels
    binary = 0
    for wheel in wheels:
        tags = [
            line.split(":", 1)[1].strip()
            for line in wheel.read_text().splitlines()
            if line.startswith("Tag:")
        ]
        assert tags, wheel
        for tag in tags:
            interpreter, abi, platform = tag.split("-")
            if platform == "any":
                assert abi == "none" and interpreter.startswith("py"), f"{wheel.parent.name}: {tag}"
                continue
            binary += 1
            assert platform_word in platform and platform.startswith(("manylinux", "musllinux", "linux")), (
                f"{wheel.parent.name}: {tag}"
            )
            assert interpreter == "cp312" or (abi == "abi3" and int(interpreter[3:]) <= 312), (
                f"{wheel.parent.name}: {tag} does not run on python3.12"
            )
    assert binary >= 3


def udp_listener() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    return sock


def received(sock: socket.socket) -> list[str]:
    datagrams = []
    while True:
        try:
            datagrams.append(sock.recv(65_536).decode())
        except BlockingIOError:
            return datagrams


def test_every_built_handler_answers_every_event_like_lambda(
    bundle: Bundle,
    sample_store: Any,
    postgres_dsn: str,
    embeddings_server: RealModelEmbeddings,
    tmp_path: Path,
) -> None:
    assert {fn.name for fn in bundle.functions} == {"RetrieveFunction", "SimilaritySearchFunction"}
    covered: set[str] = set()
    for function in bundle.functions:
        events = events_for(function)
        assert events, f"no event targets {function.name}"
        parameters = PARAMETERS | {"OpenAIBaseUrl": embeddings_server.base_url}
        environment = function.environment(parameters)
        # Template wiring: the parameters reach the function under the names Settings reads.
        assert environment["EMBEDDING_PROVIDER"] == "openai"
        assert environment["EMBEDDING_MODEL"] == "all-MiniLM-L6-v2"
        assert environment["EMBEDDING_DIMENSION"] == "384"
        assert environment["OPENAI_BASE_URL"] == embeddings_server.base_url
        assert environment["AUTO_MIGRATE"] == "false"
        assert environment["POWERTOOLS_METRICS_NAMESPACE"] == "RetrievalService"
        assert environment["DATABASE_HOST"] == PARAMETERS["DatabaseHost"]
        assert environment["DATABASE_PORT"] == "5432"
        # No secret and no API key given: those variables are left out rather than set empty.
        assert not {"DATABASE_SECRET_ARN", "DATABASE_USER", "OPENAI_API_KEY", "GEMINI_API_KEY"} & set(
            environment
        )

        xray = udp_listener()
        try:
            run = invoke_built(
                bundle,
                function,
                events,
                parameters,
                {
                    # The template passes DATABASE_HOST; DATABASE_URL (the test database) takes precedence.
                    "DATABASE_URL": postgres_dsn,
                    "AWS_XRAY_DAEMON_ADDRESS": f"127.0.0.1:{xray.getsockname()[1]}",
                },
                tmp_path,
            )
            segments = received(xray)
        finally:
            xray.close()

        heavy = {"torch", "numpy", "google.genai", "boto3", "sentence_transformers"} & set(
            run.modules_at_import
        )
        assert not heavy, f"{function.name} imports {heavy} at import time"
        assert "aws_xray_sdk" in run.modules_at_import  # LAMBDA_TASK_ROOT is set: tracing is on
        for event_path, response in zip(events, run.responses, strict=True):
            status, check = EXPECTED[event_path.name]
            assert response["statusCode"] == status, (event_path.name, response["body"])
            assert check(body(response)), (event_path.name, response["body"])
            covered.add(event_path.name)

        # Powertools: one JSON log line per request with the API Gateway request id, EMF metrics.
        logs = [json.loads(line) for line in run.output.splitlines() if line.startswith('{"level"')]
        served = [r for r in logs if r["message"] == "request served"]
        assert [r["correlation_id"] for r in served] == [
            json.loads(e.read_text())["requestContext"]["requestId"] for e in events
        ]
        assert all(
            r["service"] == "retrieval-service" and r["function_name"] == function.name for r in served
        )
        metrics = [json.loads(line) for line in run.output.splitlines() if line.startswith('{"_aws"')]
        assert sum("Latency" in m for m in metrics) == len(events)
        assert "Traceback" not in run.output
        documents = [json.loads(s.split("\n", 1)[1]) for s in segments]
        assert sum(d["name"] == "## invoke" for d in documents) == len(events), "no X-Ray handler subsegments"
        if function.name == "RetrieveFunction":
            calls = [d["http"]["request"]["url"] for d in documents if d.get("namespace") == "remote"]
            assert calls and all(url == f"{embeddings_server.base_url}/embeddings" for url in calls)
    assert covered == set(EXPECTED) == {p.name for p in EVENTS_DIR.glob("*.json")}

    # Retrieve embedded its queries through the OpenAI-compatible endpoint named by the template.
    embedded = {
        text for r in embeddings_server.requests_to("POST", r"/v1/embeddings") for text in r.json()["input"]
    }
    answered = {
        json.loads(json.loads(p.read_text())["body"])["query"]
        for p in EVENTS_DIR.glob("retrieve*.json")
        if EXPECTED[p.name][0] == 200
    }
    assert answered and answered <= embedded


def test_handlers_are_harmless_without_an_xray_daemon(
    bundle: Bundle, sample_store: Any, postgres_dsn: str, tmp_path: Path
) -> None:
    (function,) = [fn for fn in bundle.functions if fn.name == "SimilaritySearchFunction"]
    port_nobody_listens_on = udp_listener()
    address = f"127.0.0.1:{port_nobody_listens_on.getsockname()[1]}"
    port_nobody_listens_on.close()
    run = invoke_built(
        bundle,
        function,
        [EVENTS_DIR / "similarity-search.json"],
        PARAMETERS,
        {"DATABASE_URL": postgres_dsn, "AWS_XRAY_DAEMON_ADDRESS": address},
        tmp_path,
    )
    assert run.responses[0]["statusCode"] == 200
    assert top_document(body(run.responses[0])) == "k8s-scheduling"
    assert "Traceback" not in run.output


# The template as CloudFormation deploys it: the SAM transform applied, then conditions and intrinsics
# resolved for a given set of parameters. These checks need no build.

TEMPLATE = REPO_ROOT / "template.yaml"
PSEUDO = {"AWS::Partition": "aws", "AWS::Region": "us-east-1", "AWS::AccountId": "123456789012"}
SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:retrieval/db-AbCdEf"


class _ManagedPolicies:
    """The AWS managed policies the transform may attach, by name (normally looked up through IAM)."""

    def load(self) -> dict[str, str]:
        service_role = "arn:aws:iam::aws:policy/service-role"
        return {
            "AWSLambdaBasicExecutionRole": f"{service_role}/AWSLambdaBasicExecutionRole",
            "AWSLambdaVPCAccessExecutionRole": f"{service_role}/AWSLambdaVPCAccessExecutionRole",
            "AWSXrayWriteOnlyAccess": "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess",
        }


def deployed(parameters: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Resources of the transformed template with every Fn::If, Ref and Fn::Sub resolved."""
    from samtranslator.translator.transform import transform
    from samtranslator.yaml_helper import yaml_parse

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    template = yaml_parse(TEMPLATE.read_text())
    for resource in template["Resources"].values():
        props = resource.get("Properties", {})
        for key in ("CodeUri", "ContentUri"):
            if key in props:  # folders until `sam package` uploads them; the transform wants S3 URIs
                props[key] = f"s3://artifacts/{props[key].strip('/')}.zip"
    output = transform(template, {}, _ManagedPolicies())
    defaults = {
        name: str(spec["Default"]) for name, spec in template["Parameters"].items() if "Default" in spec
    }
    values = defaults | PARAMETERS | parameters
    conditions = Conditions(output.get("Conditions", {}), values)
    resources: dict[str, Any] = deep_resolve(output["Resources"], conditions, values)
    return {
        name: r for name, r in resources.items() if "Condition" not in r or conditions.holds(r["Condition"])
    }


def deep_resolve(value: Any, conditions: Conditions, values: dict[str, str]) -> Any:
    if isinstance(value, dict):
        if len(value) == 1:
            ((function, args),) = value.items()
            if function == "Fn::If":
                condition, when_true, when_false = args
                chosen = when_true if conditions.holds(condition) else when_false
                return deep_resolve(chosen, conditions, values)
            if function == "Ref" and (args == "AWS::NoValue" or args in values or args in PSEUDO):
                return NO_VALUE if args == "AWS::NoValue" else {**values, **PSEUDO}[args]
            if function == "Fn::Sub" and isinstance(args, str):
                names = {**values, **PSEUDO}
                return re.sub(r"\$\{([^}]+)\}", lambda m: names.get(m.group(1), m.group(0)), args)
        resolved = {key: deep_resolve(item, conditions, values) for key, item in value.items()}
        return {key: item for key, item in resolved.items() if item is not NO_VALUE}
    if isinstance(value, list):
        items = [deep_resolve(item, conditions, values) for item in value]
        return [item for item in items if item is not NO_VALUE]
    return value


def inline_statements(resources: dict[str, Any], role: str) -> list[dict[str, Any]]:
    return [
        statement
        for policy in resources[role]["Properties"].get("Policies", [])
        for statement in policy["PolicyDocument"]["Statement"]
    ]


def grants(statements: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(s["Action"], s["Resource"]) for s in statements if s["Effect"] == "Allow"}


def test_secret_and_bedrock_grant_only_that_secret_and_that_model(monkeypatch: pytest.MonkeyPatch) -> None:
    resources = deployed(
        {
            "DatabaseSecretArn": SECRET_ARN,
            "EmbeddingProvider": "bedrock",
            "EmbeddingModel": "amazon.titan-embed-text-v2:0",
            "EmbeddingDimension": "1024",
        },
        monkeypatch,
    )
    model = "arn:aws:bedrock:us-east-1::foundation-model/amazon.titan-embed-text-v2:0"
    assert grants(inline_statements(resources, "RetrieveFunctionRole")) == {
        ("secretsmanager:GetSecretValue", SECRET_ARN),
        ("bedrock:InvokeModel", model),
    }
    # Similarity search never embeds text: no Bedrock access.
    assert grants(inline_statements(resources, "SimilaritySearchFunctionRole")) == {
        ("secretsmanager:GetSecretValue", SECRET_ARN)
    }
    for role in ("RetrieveFunctionRole", "SimilaritySearchFunctionRole"):
        managed = {arn.rsplit("/", 1)[1] for arn in resources[role]["Properties"]["ManagedPolicyArns"]}
        assert managed == {
            "AWSLambdaBasicExecutionRole",
            "AWSLambdaVPCAccessExecutionRole",
            "AWSXrayWriteOnlyAccess",
        }
    env = resources["RetrieveFunction"]["Properties"]["Environment"]["Variables"]
    assert env["DATABASE_SECRET_ARN"] == SECRET_ARN and env["EMBEDDING_PROVIDER"] == "bedrock"
    assert "DATABASE_USER" not in env and "OPENAI_API_KEY" not in env


def test_iam_auth_grants_rds_db_connect_for_that_user_only(monkeypatch: pytest.MonkeyPatch) -> None:
    resources = deployed(
        {"DatabaseIamAuth": "true", "DatabaseUser": "retrieval_app", "DatabaseResourceId": "prx-0abc123def"},
        monkeypatch,
    )
    connect = ("rds-db:connect", "arn:aws:rds-db:us-east-1:123456789012:dbuser:prx-0abc123def/retrieval_app")
    for role in ("RetrieveFunctionRole", "SimilaritySearchFunctionRole"):
        # Provider openai: no Bedrock; no secret: no Secrets Manager.
        assert grants(inline_statements(resources, role)) == {connect}
    env = resources["SimilaritySearchFunction"]["Properties"]["Environment"]["Variables"]
    assert env["DATABASE_IAM_AUTH"] == "true" and env["DATABASE_USER"] == "retrieval_app"
    assert "DATABASE_SECRET_ARN" not in env


@pytest.mark.parametrize(
    ("issuer", "audience", "protected"),
    [
        ("https://cognito-idp.us-east-1.amazonaws.com/us-east-1_AbC123", "7h1s1sacl1ent1d", True),
        ("https://cognito-idp.us-east-1.amazonaws.com/us-east-1_AbC123", "", False),
        ("", "", False),
    ],
    ids=["issuer-and-audience", "issuer-only", "none"],
)
def test_jwt_authorizer_guards_the_retrieval_routes_only_when_issuer_and_audience_are_set(
    issuer: str, audience: str, protected: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    resources = deployed(
        {"JwtIssuer": issuer, "JwtAudience": audience, "DatabaseSecretArn": SECRET_ARN}, monkeypatch
    )
    body = resources["HttpApi"]["Properties"]["Body"]
    paths = body["paths"]
    for path, method in (("/api/v1/rag/retrieve", "post"), ("/api/v1/chunks/similarity-search", "post")):
        operation = paths[path][method]
        assert ("security" in operation) is protected
        if protected:
            assert operation["security"] == [{"JwtAuthorizer": []}]
    assert "security" not in paths["/api/v1/health"]["get"]  # health stays open for probes
    if protected:
        authorizer = body["components"]["securitySchemes"]["JwtAuthorizer"]["x-amazon-apigateway-authorizer"]
        assert authorizer["type"] == "jwt"
        assert authorizer["jwtConfiguration"] == {"issuer": issuer, "audience": [audience]}
    else:
        assert "components" not in body


def test_snapstart_applies_because_the_api_invokes_the_published_alias(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    resources = deployed({"DatabaseSecretArn": SECRET_ARN}, monkeypatch)
    for name in ("RetrieveFunction", "SimilaritySearchFunction"):
        props = resources[name]["Properties"]
        assert props["SnapStart"] == {"ApplyOn": "PublishedVersions"}
        assert props["Runtime"] == "python3.12" and props["Architectures"] == ["x86_64"]
        assert props["TracingConfig"] == {"Mode": "Active"}
        # List parameters resolve to their comma-separated value here; CloudFormation splits them.
        assert props["VpcConfig"] == {"SubnetIds": "subnet-0a1b2c3d", "SecurityGroupIds": "sg-0a1b2c3d"}
        assert any(
            r["Type"] == "AWS::Lambda::Alias"
            and r["Properties"]["Name"] == "live"
            and r["Properties"]["FunctionName"] == {"Ref": name}
            for r in resources.values()
        )
    # SnapStart only covers published versions: every route must call the alias, never $LATEST.
    uris = [
        operation["x-amazon-apigateway-integration"]["uri"]
        for item in resources["HttpApi"]["Properties"]["Body"]["paths"].values()
        for operation in item.values()
    ]
    assert len(uris) == 3
    assert all(
        re.search(r"\$\{(RetrieveFunction|SimilaritySearchFunction)Aliaslive\}", str(uri)) for uri in uris
    )
