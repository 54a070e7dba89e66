"""The deployable bundle: `sam build`, then every built handler imported and invoked the way Lambda does.

Lambda puts the function folder, the layer's `python/` and then the runtime's own packages (boto3 and
botocore, which the layer leaves out) on sys.path and nothing else, runs python3.12 on x86_64, and
passes the template's environment. Docker (and so `sam local invoke`) is not available here, so each
built handler runs in a fresh python3.12 with exactly that sys.path (a pinned boto3 installed once
under .aws-sam/lambda-runtime/ stands in for the runtime's), the template's environment variables
resolved as CloudFormation would, and events/*.json as input. Most tests deploy with
EMBEDDING_PROVIDER=openai, pointed at a local fake OpenAI-compatible server that answers with the real
local model's embeddings; with EmbeddingProvider local, the functions that embed carry EmbedderLayer
and embed in-process (test_the_built_retrieve_function_embeds_with_the_embedder_layer). The template's
CacheTable is a table on a local moto_server, reached by the runtime's boto3 through
DYNAMODB_ENDPOINT_URL; the queue function's ResultsQueue and IdempotencyTable are a queue and a table
there too (SQS_ENDPOINT_URL).
"""

from __future__ import annotations

import email.parser
import json
import os
import re
import socket
import struct
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from bench.coldstart import LAMBDA_RUNTIME_SDK, lambda_runtime_packages
from tests.conftest import EVENTS_DIR, REPO_ROOT
from tests.fakes.gemini import FakeGemini
from tests.fakes.http import FakeHTTPServer, RecordedRequest, Reply
from tests.functional.test_handlers import EXPECTED as FUNCTIONAL_CHECKS
from tests.functional.test_handlers import console_answer
from tests.integration.knowledge_support import GEMINI_KEY, HVAC_DISPLAY, HVAC_STORE, stock_fake
from tests.servers import MotoServer, create_cache_table, create_idempotency_table
from tests.template import NO_VALUE, PARAMETERS, PSEUDO, Conditions

pytestmark = pytest.mark.bundle

BUILD_DIR = REPO_ROOT / ".aws-sam" / "build"
SAM = Path(sys.executable).parent / "sam"
MIB = 1024 * 1024
LAMBDA_HARD_LIMIT_BYTES = 262_144_000  # function code plus all layers, unzipped (AWS's "250 MB", in bytes)
LAYER_SIZE_TARGET_BYTES = 60 * MIB
# Distributions the Lambda python3.12 runtime provides and the layer must leave to it (see its Makefile).
RUNTIME_PROVIDED = frozenset({"boto3", "botocore", "s3transfer", "python-dateutil", "six"})
ELF_MACHINES = {"x86_64": 62, "arm64": 183}
WHEEL_PLATFORMS = {"x86_64": "x86_64", "arm64": "aarch64"}


@dataclass(frozen=True)
class BuiltFunction:
    """One function of the built template, with what Lambda would give it."""

    name: str
    code_dir: Path
    handler: str
    layer_refs: tuple[Any, ...]  # the global layers, then the function's, before intrinsics are resolved
    built_layers: dict[str, Path]  # each layer's logical id -> its built folder
    variables: dict[str, Any]  # Globals plus the function's, before intrinsics are resolved
    conditions: dict[str, Any]
    defaults: dict[str, str]
    routes: frozenset[str]
    architecture: str

    def layers_with(self, parameters: dict[str, str]) -> tuple[Path, ...]:
        """The built layers the function carries when deployed with `parameters` (some are conditional)."""
        resolver = Conditions(self.conditions, self.defaults | parameters | {n: n for n in self.built_layers})
        resolved = [resolver.resolve(ref) for ref in self.layer_refs]
        return tuple(self.built_layers[name] for name in resolved if name is not NO_VALUE)

    @property
    def layer_dirs(self) -> tuple[Path, ...]:
        """Its layers as the tests deploy by default (PARAMETERS)."""
        return self.layers_with(PARAMETERS)

    def environment(self, parameters: dict[str, str], physical_ids: dict[str, str]) -> dict[str, str]:
        """The variables as CloudFormation sets them when deployed with `parameters`, where a `Ref` to
        one of the template's resources gives its name in `physical_ids` (for a table, its name)."""
        resolver = Conditions(self.conditions, self.defaults | parameters | physical_ids)
        resolved = {key: resolver.resolve(raw) for key, raw in self.variables.items()}
        return {key: str(value) for key, value in resolved.items() if value is not NO_VALUE}


@dataclass(frozen=True)
class Bundle:
    python: str
    functions: tuple[BuiltFunction, ...]
    layer_dirs: tuple[Path, ...]
    runtime_dir: Path  # what the Lambda runtime itself provides: boto3 and its requirements

    @property
    def core_layer(self) -> Path:
        """The built RetrievalCoreLayer (every function carries it; the parsers layer only some)."""
        (layer,) = [d for d in self.layer_dirs if d.name == "RetrievalCoreLayer"]
        return layer


@pytest.fixture(scope="session")
def bundle(python312: str) -> Bundle:
    """`sam build --cached` (dependencies cached under .aws-sam), then the built template read back."""
    env = {
        **os.environ,
        "PATH": f"{Path(python312).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "SAM_CLI_TELEMETRY": "0",
        "AWS_DEFAULT_REGION": os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
    }
    proc = subprocess.run(
        [str(SAM), "build", "--cached"], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return read_built_template(python312, lambda_runtime_packages(python312))


def read_built_template(python: str, runtime_dir: Path) -> Bundle:
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
        # SAM concatenates list properties: the global layers, then the function's own.
        props["Layers"] = globals_fn.get("Layers", []) + resource["Properties"].get("Layers", [])
        variables = {
            **globals_fn.get("Environment", {}).get("Variables", {}),
            **resource["Properties"].get("Environment", {}).get("Variables", {}),
        }
        built_layers = {
            layer: BUILD_DIR / spec["Properties"]["ContentUri"]
            for layer, spec in resources.items()
            if spec["Type"] == "AWS::Serverless::LayerVersion"
        }
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
                layer_refs=tuple(props["Layers"]),
                built_layers=built_layers,
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
    return Bundle(python=python, functions=tuple(functions), layer_dirs=layers, runtime_dir=runtime_dir)


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


# Runs inside the isolated python3.12: only the standard library is importable besides the function
# folder, the layer and (last, as in Lambda) the runtime's own packages.
DRIVER = textwrap.dedent(
    """
    import importlib, json, os, sys, time

    *search_path, handler_spec, events_file, results_file = sys.argv[1:]
    ours = [p for p in sys.path if not p.startswith(sys.base_prefix)]
    if ours != search_path:
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
        # Lambda sets the trace header per invocation (an SQS event carries no HTTP headers).
        trace = event.get("headers", {}).get("x-amzn-trace-id", "Root=1-6920f3a0-0123456789abcdef01234567")
        os.environ["_X_AMZN_TRACE_ID"] = f"{trace};Parent=53995c3f42cd8ad8;Sampled=1"
        responses.append(handler(event, Context()))
    result = {
        "import_seconds": import_seconds,
        "modules_at_import": modules_at_import,
        "modules_after": sorted(sys.modules),
        "module_files": {
            name: getattr(module, "__file__", None) for name, module in list(sys.modules.items())
        },
        "responses": responses,
    }
    with open(results_file, "w") as out:
        json.dump(result, out)
    """
)


@dataclass(frozen=True)
class CacheTable:
    """The template's CacheTable, deployed as a table on the session's moto_server."""

    name: str
    moto: MotoServer

    @property
    def client_env(self) -> dict[str, str]:
        """What a handler needs to reach it: the endpoint, and dummy credentials as Lambda would set."""
        return {
            "DYNAMODB_ENDPOINT_URL": self.moto.endpoint_url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def item_count(self) -> int:
        count: int = self.moto.client("dynamodb").scan(TableName=self.name, Select="COUNT")["Count"]
        return count


@pytest.fixture()
def cache_table(moto: MotoServer) -> CacheTable:
    """A new table for each test, so that a test's first request for an answer is a miss."""
    name = f"retrieval-cache-{uuid.uuid4().hex[:12]}"
    create_cache_table(moto.client("dynamodb"), name)
    return CacheTable(name, moto)


@dataclass
class Invocation:
    responses: list[dict[str, Any]]
    modules_at_import: list[str]
    modules_after: list[str]
    module_files: dict[str, str | None]
    output: str


def invoke_built(
    bundle: Bundle,
    function: BuiltFunction,
    events: list[Path],
    parameters: dict[str, str],
    cache: CacheTable,
    extra_env: dict[str, str],
    tmp_path: Path,
    physical_ids: dict[str, str] | None = None,
) -> Invocation:
    """Invokes `function` once per event, in order, in one fresh process (one Lambda instance).

    `physical_ids`: what a `Ref` to other resources of the template gives (the cache table is known)."""
    events_file = tmp_path / f"{function.name}-events.json"
    results_file = tmp_path / f"{function.name}-results.json"
    events_file.write_text(json.dumps([str(e) for e in events]))
    # /var/task, /opt/python (every layer of the function, unpacked into one folder), then the runtime's
    # site-packages: Lambda's order.
    python_path = [
        str(function.code_dir),
        *(str(layer_dir / "python") for layer_dir in function.layers_with(PARAMETERS | parameters)),
        str(bundle.runtime_dir),
    ]
    env = {
        **function.environment(parameters, {"CacheTable": cache.name, **(physical_ids or {})}),
        **cache.client_env,
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
        result["responses"],
        result["modules_at_import"],
        result["modules_after"],
        result["module_files"],
        proc.stdout + proc.stderr,
    )


def events_for(function: BuiltFunction) -> list[Path]:
    return [
        path
        for path in sorted(EVENTS_DIR.glob("*.json"))
        if json.loads(path.read_text()).get("routeKey") in function.routes
    ]


CACHED_ROUTES = frozenset({"POST /api/v1/rag/retrieve", "POST /api/v1/chunks/similarity-search"})


def route(event_path: Path) -> str:
    key: str = json.loads(event_path.read_text())["routeKey"]
    return key


def header(response: dict[str, Any], name: str) -> str | None:
    """A response header, whatever the case of its name (HTTP header names are case-insensitive)."""
    values = [value for key, value in response.get("headers", {}).items() if key.lower() == name.lower()]
    assert len(values) <= 1, response["headers"]
    return values[0] if values else None


def body(response: dict[str, Any]) -> dict[str, Any]:
    assert response["isBase64Encoded"] is False
    assert response["headers"]["content-type"] == "application/json"
    parsed: dict[str, Any] = json.loads(response["body"])
    return parsed


def body_or_empty(response: dict[str, Any]) -> dict[str, Any]:
    """The JSON body, or {} for a 204, which has none; one of the console's files as its checks read it."""
    if response["statusCode"] == 204:
        assert not response.get("body"), response
        return {}
    if "content-security-policy" in response["headers"] and response["statusCode"] == 200:
        return console_answer(response)
    return body(response)


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
    "health.json": (
        200,
        lambda b: (
            b["status"] == "ok"
            and {check["status"] for check in b["checks"].values()} == {"ok"}
            and b["checks"]["embedder"]["provider"] == "openai"
        ),
    ),
    # HEAD: the status of GET, and no body.
    "health-head.json": (200, lambda b: b == {}),
    # Gemini File Search, against a fake Gemini API, with the key read from the template's secret.
    "knowledge-search.json": (
        200,
        lambda b: (
            [s["score"] for s in b["sources"]] == [0.88, 0.91, None]
            and b["sources"][0]["storeName"] == HVAC_STORE
        ),
    ),
    "knowledge-search-missing-store.json": (
        422,
        lambda b: b["error"]["details"]["errors"][0]["field"] == "store",
    ),
    "knowledge-search-unknown-store.json": (
        404,
        lambda b: b["error"]["details"] == {"store": "fileSearchStores/does-not-exist"},
    ),
    "retrieve-gemini.json": (
        200,
        lambda b: (
            b["engineUsed"] == "gemini-file-search" and [r["score"] for r in b["results"]] == [0.91, 0.88]
        ),
    ),
    "resolve-store.json": (
        200,
        # "cache" when the retrieve function's knowledge search resolved it first: the table is shared.
        lambda b: (
            b["name"] == HVAC_STORE
            and b["displayName"] == HVAC_DISPLAY
            and b["resolvedBy"] in {"displayName", "cache"}
        ),
    ),
    "resolve-store-short-name.json": (
        200,
        lambda b: b["name"] == HVAC_STORE and b["resolvedBy"] == "pattern",
    ),
    "resolve-store-pgvector.json": (200, lambda b: b["name"] == "sample" and b["backend"] == "pgvector"),
    "resolve-store-missing-name.json": (422, lambda b: b["error"]["details"]["errors"][0]["field"] == "name"),
    "retrieve-hybrid-mmr.json": (
        200,
        lambda b: (
            b["pipeline"]["hybrid"] and b["pipeline"]["rerankStrategy"] == "mmr" and b["totalResults"] == 3
        ),
    ),
    "retrieve-batch.json": (
        200,
        lambda b: (
            [item["status"] for item in b["results"]] == [200, 200, 404]
            and top_document(b["results"][0]["response"]) == "k8s-scheduling"
        ),
    ),
    "retrieve-batch-too-many.json": (422, lambda b: b["error"]["message"].startswith("requests")),
    # Three judged queries scored with the default methods; the fourth, judged only not relevant, skipped.
    "evaluate.json": (
        200,
        lambda b: (
            b["complete"] is True
            and (b["scoredQueries"], b["skippedQueries"]) == (3, 1)
            and [m["name"] for m in b["methods"]] == ["dense", "hybrid", "keyword"]
            and b["queries"][0]["scores"]["dense"]["topDocuments"][0] == "k8s-scheduling"
        ),
    ),
    "evaluate-unknown-query.json": (
        422,
        lambda b: b["error"]["details"]["errors"][0]["field"] == "judgments.0.queryId",
    ),
    "list-chunks.json": (
        200,
        lambda b: (
            [(c["id"], c["pageNumber"]) for c in b["chunks"]] == [("k8s-scheduling#0", 12)]
            and b["nextCursor"] is None
        ),
    ),
}
# The stores-*.json events walk one store's life in file order (PUT ... DELETE), and the mcp-*.json
# events answer JSON-RPC: both are checked as the functional tier checks them.
FUNCTIONAL_TIER_CHECKS = {
    name: check
    for name, check in FUNCTIONAL_CHECKS.items()
    if name.startswith(("stores-", "mcp-", "answer", "console"))
}
# Retrieve events answered by Gemini File Search, not by an embedding and pgvector.
GEMINI_RETRIEVE_EVENTS = frozenset({"retrieve-gemini.json"})


@pytest.fixture()
def gemini_api(moto: MotoServer) -> Iterator[tuple[FakeGemini, str]]:
    """A fake Gemini API with the test stores, and the ARN of a Secrets Manager secret holding its key."""
    arn: str = moto.client("secretsmanager").create_secret(
        Name=f"retrieval/gemini-{uuid.uuid4().hex[:8]}", SecretString=GEMINI_KEY
    )["ARN"]
    with FakeGemini(api_key=GEMINI_KEY) as fake:
        stock_fake(fake)
        yield fake, arn


def test_sam_build_puts_the_core_at_python_retrieval_core_without_torch_or_boto3(bundle: Bundle) -> None:
    layer = bundle.core_layer
    package = layer / "python" / "retrieval_core"
    assert (package / "__init__.py").is_file()
    assert (package / "api" / "lambda_handler.py").is_file()
    assert (package / "db" / "credentials.py").is_file()
    assert (package / "documents" / "sample_corpus.jsonl").is_file()
    shipped = {p.name for p in (layer / "python").iterdir()}
    for absent in (
        "torch",
        "sentence_transformers",
        "transformers",
        "pytest",
        "moto",
        "mypy",
        "numpy",
        "requirements.txt",
        "bin",
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
    ):
        assert present in shipped, f"{present} is missing from the layer"
    assert (layer / "python" / "google" / "genai").is_dir()


def test_the_layer_leaves_boto3_and_botocore_to_the_runtime(bundle: Bundle) -> None:
    layer = bundle.core_layer
    python_dir = layer / "python"
    shipped = {p.name for p in python_dir.iterdir()}
    for absent in ("boto3", "botocore", "s3transfer", "dateutil", "six.py"):
        assert absent not in shipped, f"{absent} is the Lambda runtime's; the layer's copy would shadow it"
    assert not RUNTIME_PROVIDED & set(distributions(python_dir)), "runtime packages' metadata left behind"
    # The stand-in for the runtime has them: that is what the handlers import.
    runtime = distributions(bundle.runtime_dir)
    assert set(runtime) >= RUNTIME_PROVIDED
    assert [f"{name}=={runtime[name].version}" for name in ("boto3", "botocore")] == list(LAMBDA_RUNTIME_SDK)


def test_every_requirement_in_the_layer_is_met_by_the_layer_or_the_runtime(bundle: Bundle) -> None:
    """What pip's resolver checked for the full set holds for what is shipped: every requirement of
    requirements.txt, followed through the requirements of what meets it (with the extras asked for),
    is met by the first copy on Lambda's sys.path, the layer's or else the runtime's, in a version it
    accepts. The runtime may only be relied on for what the layer leaves to it."""
    (function_architecture,) = {fn.architecture for fn in bundle.functions}
    layer = bundle.core_layer
    layer_dists = distributions(layer / "python")
    runtime_dists = distributions(bundle.runtime_dir)
    environment = lambda_marker_environment(function_architecture)
    requirements_file = REPO_ROOT / "layers" / "retrieval_core" / "requirements.txt"
    from_runtime = met_from(requirements_file, [layer_dists, runtime_dists], environment)["runtime"]
    assert from_runtime <= RUNTIME_PROVIDED, f"the layer lacks {from_runtime - RUNTIME_PROVIDED}"
    assert "botocore" in from_runtime  # aws-xray-sdk's requirement, met by the runtime


def test_the_mcp_function_ships_the_sdk_and_only_what_the_layer_lacks(bundle: Bundle) -> None:
    """functions/mcp/requirements.txt, installed without dependencies: followed through every requirement,
    each is met by the first copy on Lambda's sys.path (the function's, the layer's, the runtime's), and
    the function ships no second copy of a layer distribution, which would shadow it."""
    (function,) = [fn for fn in bundle.functions if fn.name == "McpFunction"]
    own = distributions(function.code_dir)
    layer_dists = distributions(bundle.core_layer / "python")
    assert "mcp" in own and not own.keys() & layer_dists.keys()
    environment = lambda_marker_environment(function.architecture)
    sources = met_from(
        REPO_ROOT / "functions" / "mcp" / "requirements.txt",
        [own, layer_dists, distributions(bundle.runtime_dir)],
        environment,
    )
    assert sources["function"] == set(own), "a distribution the function ships that nothing needs"
    assert {"pydantic", "starlette", "anyio"} <= sources["layer"]
    assert not sources.get("runtime")
    # Its bytecode ships too, valid after zipping (PEP 552 unchecked hash), for every module.
    sources_py = list(function.code_dir.rglob("*.py"))
    compiled = {p.parent.parent / (p.name.split(".")[0] + ".py") for p in function.code_dir.rglob("*.pyc")}
    assert sources_py and set(sources_py) <= compiled


def lambda_marker_environment(architecture: str) -> dict[str, str]:
    """Environment markers as pip evaluates them for Lambda's python3.12 on `architecture`."""
    environment = {key: str(value) for key, value in default_environment().items()}
    return environment | {
        "python_version": "3.12",
        "python_full_version": "3.12.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "os_name": "posix",
        "platform_machine": WHEEL_PLATFORMS[architecture],
    }


def met_from(
    requirements_file: Path, path: list[dict[str, Distribution]], environment: dict[str, str]
) -> dict[str, set[str]]:
    """Follow `requirements_file` through the requirements of what meets each (with the extras asked
    for); each must be met, in a version it accepts, by the first of `path` holding it. The names met by
    each of function, layer and runtime (in `path`'s order; a two-folder path is layer and runtime)."""
    labels = ("function", "layer", "runtime")[-len(path) :]
    pending = [
        (Requirement(line), requirements_file.name)
        for line in (raw.split("#", 1)[0].strip() for raw in requirements_file.read_text().splitlines())
        if line
    ]
    seen: set[tuple[str, str]] = set()
    sources: dict[str, set[str]] = {label: set() for label in labels}
    while pending:
        requirement, wanted_by = pending.pop()
        name = canonicalize_name(requirement.name)
        where = next((label for label, dists in zip(labels, path, strict=True) if name in dists), None)
        assert where is not None, f"{requirement} (for {wanted_by}) is nowhere on sys.path"
        met = path[labels.index(where)][name]
        assert requirement.specifier.contains(met.version, prereleases=True), (
            f"{wanted_by} needs {requirement}, but {name} {met.version} comes first on sys.path"
        )
        sources[where].add(name)
        for extra in {"", *requirement.extras}:
            if (name, extra) in seen:
                continue
            seen.add((name, extra))
            for dependency in met.requires:
                marker_env = {**environment, "extra": extra}
                if dependency.marker is None or dependency.marker.evaluate(marker_env):
                    pending.append((dependency, f"{name} {met.version}"))
    return sources


def test_layer_fits_its_60_mib_budget_and_reports_its_size(bundle: Bundle) -> None:
    layer = bundle.core_layer
    files = [f for f in layer.rglob("*") if f.is_file()]
    size = sum(f.stat().st_size for f in files)
    bytecode = sum(f.stat().st_size for f in files if f.suffix == ".pyc")
    print(
        f"\ncore layer unzipped: {size / MIB:.1f} MiB, of which {bytecode / MIB:.1f} MiB bytecode "
        f"(target {LAYER_SIZE_TARGET_BYTES / MIB:.0f} MiB)"
    )
    assert size <= LAYER_SIZE_TARGET_BYTES, f"layer is {size / MIB:.1f} MiB; docs/benchmarks-bundle.md"


def test_every_function_with_all_its_layers_fits_lambdas_250_mb(bundle: Bundle) -> None:
    """AWS counts a function's code plus every layer it carries, unzipped, against 250 MB: checked for
    each provider, EmbeddingProvider local adding EmbedderLayer to the functions that embed."""

    def unzipped(folder: Path) -> int:
        return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())

    print()
    for function in bundle.functions:
        for provider in ("openai", "local"):
            layer_dirs = function.layers_with(PARAMETERS | {"EmbeddingProvider": provider})
            total = unzipped(function.code_dir) + sum(unzipped(layer) for layer in layer_dirs)
            layers = " + ".join(f"{layer.name} {unzipped(layer) / 1e6:.1f}" for layer in layer_dirs)
            print(
                f"{function.name} ({provider}): {total:,} bytes = {total / 1e6:.1f} MB unzipped "
                f"(code {unzipped(function.code_dir) / 1e6:.2f} + {layers} MB; limit 262,144,000 bytes)"
            )
            assert total < LAMBDA_HARD_LIMIT_BYTES, (function.name, provider)
    local = {
        fn.name for fn in bundle.functions if any(d.name == "EmbedderLayer" for d in fn.layers_with(LOCAL))
    }
    assert local == {
        "RetrieveFunction",
        "RetrieveQueueFunction",
        "DocumentsFunction",
        "IngestFunction",
        "McpFunction",
    }


def test_layer_bytecode_is_for_python312_and_valid_after_zipping(bundle: Bundle) -> None:
    layer = bundle.core_layer
    compiled = list((layer / "python").rglob("*.pyc"))
    assert len(compiled) > 300  # the modules imported at cold start (the main test checks which)
    for pyc in compiled:
        assert pyc.parent.name == "__pycache__" and pyc.name.endswith(".cpython-312.pyc"), pyc
        source = pyc.parent.parent / f"{pyc.name.removesuffix('.cpython-312.pyc')}.py"
        assert source.is_file(), f"{pyc}: the source stays beside it, for tracebacks"
        with pyc.open("rb") as f:
            (flags,) = struct.unpack("<I", f.read(8)[4:8])
        # PEP 552: bit 0 hash-based, bit 1 check_source. Unchecked hash: never compared with the .py,
        # whose mtime the zip round trip changes.
        assert flags == 0b01, f"{pyc}: flags {flags:#b}"


@dataclass(frozen=True)
class Distribution:
    version: Version
    requires: tuple[Requirement, ...]


def distributions(folder: Path) -> dict[str, Distribution]:
    """The distributions installed in `folder`, by canonical name, from their .dist-info metadata."""
    found: dict[str, Distribution] = {}
    for info in folder.glob("*.dist-info"):
        metadata = email.parser.Parser().parsestr((info / "METADATA").read_text(encoding="utf-8"))
        requires = tuple(Requirement(r) for r in metadata.get_all("Requires-Dist") or [])
        found[canonicalize_name(metadata["Name"])] = Distribution(Version(metadata["Version"]), requires)
    return found


def test_binary_wheels_match_the_template_architecture(bundle: Bundle) -> None:
    (function_architecture,) = {fn.architecture for fn in bundle.functions}
    shared_objects = [
        p
        for layer_dir in bundle.layer_dirs
        for p in (layer_dir / "python").rglob("*.so*")
        if p.is_file() and ".so" in p.name
    ]
    assert len(shared_objects) >= 5  # pydantic_core, psycopg_binary and its libs, cryptography, ...
    for path in shared_objects:
        with path.open("rb") as f:
            header = f.read(20)
        assert header[:4] == b"\x7fELF", path
        assert header[4] == 2, f"{path} is not 64-bit"
        byte_order = "<" if header[5] == 1 else ">"
        (machine,) = struct.unpack(f"{byte_order}H", header[18:20])
        assert machine == ELF_MACHINES[function_architecture], f"{path}: e_machine {machine}"

    platform_word = WHEEL_PLATFORMS[function_architecture]
    wheels = [w for layer_dir in bundle.layer_dirs for w in (layer_dir / "python").glob("*.dist-info/WHEEL")]
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


# What tracing loads, at cold start or on the first request: the X-Ray SDK, wrapt (its patching) and the
# patched HTTP client.
TRACING_PACKAGES = frozenset({"aws_xray_sdk", "wrapt", "httpx"})


def layer_modules_without_bytecode(function: Any, run: Any, modules: list[str] | None = None) -> list[str]:
    """Layer modules the handler imported at cold start (or `modules`) that have no .pyc: Lambda compiles
    those each time."""
    layer_python = function.layer_dirs[0] / "python"
    names = run.modules_at_import if modules is None else modules
    sources = [Path(str(run.module_files[name])) for name in names]
    return [
        str(source.relative_to(layer_python))
        for source in sources
        if source.is_relative_to(layer_python)
        and source.suffix == ".py"
        and not (source.parent / "__pycache__" / f"{source.stem}.cpython-312.pyc").is_file()
    ]


def test_every_built_handler_answers_every_event_like_lambda(
    bundle: Bundle,
    sample_store: Any,
    attachable_table: str,
    postgres_dsn: str,
    embeddings_server: RealModelEmbeddings,
    cache_table: CacheTable,
    gemini_api: tuple[FakeGemini, str],
    tmp_path: Path,
) -> None:
    gemini, gemini_secret_arn = gemini_api
    assert {fn.name for fn in bundle.functions} == {
        "RetrieveFunction",
        "SimilaritySearchFunction",
        "RetrieveQueueFunction",
        "ResolveStoreFunction",
        "IngestFunction",
        "DocumentsFunction",
        "McpFunction",
        "MigrateFunction",
    }
    covered: set[str] = set()
    for function in bundle.functions:
        if function.name in ("RetrieveQueueFunction", "IngestFunction", "MigrateFunction"):
            # SQS-triggered: test_the_built_queue_function_answers_its_sqs_event_like_lambda, and
            # tests/functional/test_ingest_handler.py for the ingest events. The migrate function
            # answers CloudFormation custom resource events, tested with its code.
            continue
        events = events_for(function)
        assert events, f"no event targets {function.name}"
        parameters = PARAMETERS | {
            "OpenAIBaseUrl": embeddings_server.base_url,
            "GeminiApiKeySecretArn": gemini_secret_arn,
        }
        environment = function.environment(parameters, {"CacheTable": cache_table.name})
        if function.name in ("RetrieveFunction", "ResolveStoreFunction"):
            assert environment["GEMINI_API_KEY_SECRET_ARN"] == gemini_secret_arn
        else:
            assert "GEMINI_API_KEY_SECRET_ARN" not in environment
        # Template wiring: the parameters reach the function under the names Settings reads.
        assert environment["EMBEDDING_PROVIDER"] == "openai"
        assert environment["EMBEDDING_MODEL"] == "all-MiniLM-L6-v2"
        assert environment["EMBEDDING_DIMENSION"] == "384"
        assert environment["OPENAI_BASE_URL"] == embeddings_server.base_url
        assert environment["AUTO_MIGRATE"] == "false"
        assert environment["POWERTOOLS_METRICS_NAMESPACE"] == "RetrievalService"
        assert environment["DATABASE_HOST"] == PARAMETERS["DatabaseHost"]
        assert environment["DATABASE_PORT"] == "5432"
        assert environment["CACHE_TABLE_NAME"] == cache_table.name
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
                cache_table,
                {
                    # The template passes DATABASE_HOST; DATABASE_URL (the test database) takes precedence.
                    "DATABASE_URL": postgres_dsn,
                    "AWS_XRAY_DAEMON_ADDRESS": f"127.0.0.1:{xray.getsockname()[1]}",
                    # The Gemini key comes from the template's secret, on moto; the API is the fake.
                    "AWS_ENDPOINT_URL_SECRETS_MANAGER": cache_table.moto.endpoint_url,
                    "GEMINI_BASE_URL": gemini.url,
                    "GEMINI_RETRY_BASE_DELAY_S": "0.01",
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
        if function.name == "SimilaritySearchFunction":
            # It never embeds: the provider's HTTP client is neither traced nor imported at cold start.
            assert "httpx" not in run.modules_at_import
        # Lambda cannot write bytecode: each layer module imported at cold start ships its .pyc.
        uncompiled = layer_modules_without_bytecode(function, run)
        assert not uncompiled, f"{function.name} compiles at cold start: {uncompiled[:10]}"
        # LAMBDA_TASK_ROOT is set: tracing is on. On demand (no AWS_LAMBDA_INITIALIZATION_TYPE), the X-Ray
        # SDK is left to the first request, whose tracing modules ship their bytecode too.
        assert "aws_xray_sdk" not in run.modules_at_import and "aws_xray_sdk" in run.modules_after
        tracing = [name for name in run.modules_after if name.split(".")[0] in TRACING_PACKAGES]
        uncompiled = layer_modules_without_bytecode(function, run, tracing)
        assert not uncompiled, f"{function.name} compiles at its first request: {uncompiled[:10]}"
        for event_path, response in zip(events, run.responses, strict=True):
            if event_path.name in FUNCTIONAL_TIER_CHECKS:  # the functional tier's checks, on the built bundle
                FUNCTIONAL_TIER_CHECKS[event_path.name](response["statusCode"], body_or_empty(response))
                covered.add(event_path.name)
                continue
            status, check = EXPECTED[event_path.name]
            assert response["statusCode"] == status, (event_path.name, response["body"])
            is_head = route(event_path).startswith("HEAD ")
            assert check({} if is_head and response["body"] == "" else body(response)), (
                event_path.name,
                response["body"],
            )
            if status == 200 and route(event_path) in CACHED_ROUTES:
                assert header(response, "X-Cache") in {"miss", "hit"}, (event_path.name, response["headers"])
            covered.add(event_path.name)
        # The answers went through the DynamoDB cache, which never failed (it fails open, logging).
        assert "cache unavailable" not in run.output
        assert GEMINI_KEY not in run.output and GEMINI_KEY not in json.dumps(run.responses)

        # Powertools: one JSON log line per request with the API Gateway request id, EMF metrics.
        logs = [json.loads(line) for line in run.output.splitlines() if line.startswith('{"level"')]
        served = [r for r in logs if r["message"] == "request served"]
        assert [r["correlation_id"] for r in served] == [
            json.loads(e.read_text())["requestContext"]["requestId"] for e in events
        ]
        assert all(
            r["service"] == PSEUDO["AWS::StackName"] and r["function_name"] == function.name for r in served
        )
        metrics = [json.loads(line) for line in run.output.splitlines() if line.startswith('{"_aws"')]
        assert sum("Latency" in m for m in metrics) == len(events)
        assert "Traceback" not in run.output
        documents = [json.loads(s.split("\n", 1)[1]) for s in segments]
        assert sum(d["name"] == "## invoke" for d in documents) == len(events), "no X-Ray handler subsegments"
        if function.name == "RetrieveFunction":
            calls = [d["http"]["request"]["url"] for d in documents if d.get("namespace") == "remote"]
            assert calls and all(
                url == f"{embeddings_server.base_url}/embeddings" or url.startswith(gemini.url)
                for url in calls
            )
    http_events = {p.name for p in EVENTS_DIR.glob("*.json") if "routeKey" in json.loads(p.read_text())}
    assert covered == set(EXPECTED) | set(FUNCTIONAL_TIER_CHECKS) == http_events
    # The Gemini routes used the key read from Secrets Manager, and it never reached a response or a log.
    assert gemini.generate_calls() and gemini.list_calls()
    assert all(r.headers["x-goog-api-key"] == GEMINI_KEY for r in gemini.requests)
    assert cache_table.item_count() > 0, "nothing was written to the cache table"

    # Retrieve embedded its queries through the OpenAI-compatible endpoint named by the template.
    embedded = {
        text for r in embeddings_server.requests_to("POST", r"/v1/embeddings") for text in r.json()["input"]
    }
    answered = {
        json.loads(json.loads(p.read_text())["body"])["query"]
        for p in EVENTS_DIR.glob("retrieve*.json")
        if EXPECTED[p.name][0] == 200
        and p.name not in GEMINI_RETRIEVE_EVENTS
        and not p.name.startswith("retrieve-batch")
    }
    assert answered and answered <= embedded


def test_handlers_are_harmless_without_an_xray_daemon(
    bundle: Bundle, sample_store: Any, postgres_dsn: str, cache_table: CacheTable, tmp_path: Path
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
        cache_table,
        {"DATABASE_URL": postgres_dsn, "AWS_XRAY_DAEMON_ADDRESS": address},
        tmp_path,
    )
    assert run.responses[0]["statusCode"] == 200
    assert top_document(body(run.responses[0])) == "k8s-scheduling"
    assert "Traceback" not in run.output


def test_the_same_retrieve_twice_in_one_instance_is_answered_from_dynamodb_the_second_time(
    bundle: Bundle,
    sample_store: Any,
    postgres_dsn: str,
    embeddings_server: RealModelEmbeddings,
    cache_table: CacheTable,
    tmp_path: Path,
) -> None:
    (function,) = [fn for fn in bundle.functions if fn.name == "RetrieveFunction"]
    xray = udp_listener()
    try:
        run = invoke_built(
            bundle,
            function,
            [EVENTS_DIR / "retrieve.json"] * 2,
            PARAMETERS | {"OpenAIBaseUrl": embeddings_server.base_url},
            cache_table,
            {"DATABASE_URL": postgres_dsn, "AWS_XRAY_DAEMON_ADDRESS": f"127.0.0.1:{xray.getsockname()[1]}"},
            tmp_path,
        )
    finally:
        xray.close()
    first, second = run.responses
    assert first["statusCode"] == second["statusCode"] == 200, (first["body"], second["body"])
    assert [header(first, "X-Cache"), header(second, "X-Cache")] == ["miss", "hit"]
    assert second["body"] == first["body"]
    assert top_document(body(second)) == "k8s-scheduling"
    assert cache_table.item_count() > 0
    # The runtime's boto3 and botocore did the talking (the layer has neither), on the layer's urllib3.
    assert "boto3" not in run.modules_at_import
    origins = {name: Path(str(run.module_files[name])) for name in ("boto3", "botocore", "urllib3")}
    assert origins["boto3"].is_relative_to(bundle.runtime_dir)
    assert origins["botocore"].is_relative_to(bundle.runtime_dir)
    assert origins["urllib3"].is_relative_to(function.layer_dirs[0])
    assert "Traceback" not in run.output and "cache unavailable" not in run.output


LOCAL = PARAMETERS | {"EmbeddingProvider": "local"}


def test_the_built_retrieve_function_embeds_with_the_embedder_layer(
    bundle: Bundle, sample_store: Any, postgres_dsn: str, cache_table: CacheTable, tmp_path: Path
) -> None:
    """EmbeddingProvider local: the query is embedded in the function by the layer's model (no provider
    call, nothing built or downloaded), and retrieval over the store the service ingested finds the same
    documents. The layer's models/ folder stands in for /opt/models, where Lambda would mount it."""
    (function,) = [fn for fn in bundle.functions if fn.name == "RetrieveFunction"]
    layers = function.layers_with(LOCAL)
    assert [layer.name for layer in layers] == ["RetrievalCoreLayer", "EmbedderLayer"]
    model_dir = layers[1] / "models" / "all-MiniLM-L6-v2"
    assert sorted(p.name for p in model_dir.iterdir()) == [
        "1_Pooling",
        "config.json",
        "model.w8.onnx",
        "sentence_bert_config.json",
        "tokenizer.json",
    ]
    environment = function.environment(LOCAL, {"CacheTable": cache_table.name})
    assert environment["LOCAL_MODEL_DIR"] == "/opt/models/all-MiniLM-L6-v2"
    assert environment["LOCAL_EMBEDDER_RUNTIME"] == "onnx-w8"
    home = tmp_path / "home"
    home.mkdir()
    xray = udp_listener()
    try:
        run = invoke_built(
            bundle,
            function,
            [EVENTS_DIR / "retrieve.json", EVENTS_DIR / "health.json"],
            LOCAL,
            cache_table,
            {
                "DATABASE_URL": postgres_dsn,
                "AWS_XRAY_DAEMON_ADDRESS": f"127.0.0.1:{xray.getsockname()[1]}",
                "LOCAL_MODEL_DIR": str(model_dir),
                "HOME": str(home),
            },
            tmp_path,
        )
    finally:
        xray.close()
    retrieved, health = run.responses
    status, check = EXPECTED["retrieve.json"]
    assert retrieved["statusCode"] == status and check(body(retrieved)), retrieved["body"]
    embedder = body(health)["checks"]["embedder"]
    assert embedder == {"status": "ok", "provider": "local", "model": "all-MiniLM-L6-v2", "loaded": True}
    origins = {name: str(run.module_files[name]) for name in ("onnxruntime", "tokenizers", "numpy")}
    assert all(origin.startswith(str(layers[1] / "python")) for origin in origins.values()), origins
    assert not {"torch", "sentence_transformers", "onnx", "safetensors"} & set(run.modules_after)
    # Nothing at import: the model loads on the first embedding. Nothing written: no cache was needed.
    assert "onnxruntime" not in run.modules_at_import
    assert list(home.iterdir()) == []
    assert "Traceback" not in run.output


SQS_EVENT = EVENTS_DIR / "sqs-retrieve.json"


def test_the_built_queue_function_answers_its_sqs_event_like_lambda(
    bundle: Bundle,
    sample_store: Any,
    postgres_dsn: str,
    embeddings_server: RealModelEmbeddings,
    cache_table: CacheTable,
    moto: MotoServer,
    tmp_path: Path,
) -> None:
    (function,) = [fn for fn in bundle.functions if fn.name == "RetrieveQueueFunction"]
    sqs = moto.client("sqs")
    suffix = uuid.uuid4().hex[:8]
    results = sqs.create_queue(QueueName=f"ResultsQueue-{suffix}")["QueueUrl"]
    extra = sqs.create_queue(QueueName=f"team-replies-{suffix}")["QueueUrl"]
    table = f"IdempotencyTable-{suffix}"
    create_idempotency_table(moto.client("dynamodb"), table)
    parameters = PARAMETERS | {
        "OpenAIBaseUrl": embeddings_server.base_url,
        "ReplyQueueUrls": extra,
        "ReplyQueueArns": f"arn:aws:sqs:us-east-1:123456789012:team-replies-{suffix}",
    }
    physical_ids = {"ResultsQueue": results, "IdempotencyTable": table}
    environment = function.environment(parameters, {"CacheTable": cache_table.name, **physical_ids})
    # Template wiring: where replies go, which reply queues are allowed, which table remembers answers.
    assert environment["RESULTS_QUEUE_URL"] == results
    assert environment["REPLY_QUEUE_URLS"] == extra
    assert environment["IDEMPOTENCY_TABLE_NAME"] == table
    assert environment["CACHE_TABLE_NAME"] == cache_table.name
    assert environment["EMBEDDING_PROVIDER"] == "openai"
    embeddings_server.reset()

    event = json.loads(SQS_EVENT.read_text())
    # The same batch twice: Lambda invoked again with messages it had already answered (a redelivery).
    run = invoke_built(
        bundle,
        function,
        [SQS_EVENT, SQS_EVENT],
        parameters,
        cache_table,
        {"DATABASE_URL": postgres_dsn, "SQS_ENDPOINT_URL": moto.endpoint_url},
        tmp_path,
        physical_ids,
    )
    assert run.responses == [{"batchItemFailures": []}, {"batchItemFailures": []}]
    heavy = {"torch", "numpy", "google.genai", "boto3", "sentence_transformers", "fastapi", "mangum"}
    assert not heavy & set(run.modules_at_import), "the queue handler imports these at cold start"
    assert "boto3" in run.modules_after  # created on first use
    uncompiled = layer_modules_without_bytecode(function, run)
    assert not uncompiled, f"the queue function compiles at cold start: {uncompiled[:10]}"
    assert "Traceback" not in run.output

    messages = sqs.receive_message(QueueUrl=results, MaxNumberOfMessages=10, MessageAttributeNames=["All"])
    replies = [json.loads(m["Body"]) for m in messages.get("Messages", [])]
    expected_ids = sorted(json.loads(r["body"])["requestId"] for r in event["Records"])
    # One reply per job: the second invocation answered nothing again.
    assert sorted(r["requestId"] for r in replies) == expected_ids
    by_id = {r["requestId"]: r for r in replies}
    assert by_id["job-7f3a-0001"]["status"] == "ok"
    assert top_document(by_id["job-7f3a-0001"]["response"]) == "k8s-scheduling"
    assert top_document(by_id["job-7f3a-0002"]["response"]) == "hvac-cold-complaints"
    assert by_id["job-7f3a-0003"]["status"] == "error"
    assert by_id["job-7f3a-0003"]["error"]["details"]["errors"][0]["field"] == "grade"
    # The batch's two queries went to the provider in one call; the redelivery embedded nothing.
    calls = embeddings_server.requests_to("POST", r"(?:/v1)?/embeddings")
    assert [len(c.json()["input"]) for c in calls] == [2]
    logs = [json.loads(line) for line in run.output.splitlines() if line.startswith('{"level"')]
    assert [r["records"] for r in logs if r["message"] == "batch processed"] == [3, 3]


def test_the_built_ingest_function_applies_its_s3_events_like_lambda(
    bundle: Bundle,
    service: Any,
    postgres_dsn: str,
    embeddings_server: RealModelEmbeddings,
    cache_table: CacheTable,
    moto: MotoServer,
    tmp_path: Path,
) -> None:
    """events/sqs-ingest-*.json through the built IngestFunction (core + parsers layers) in one instance:
    the put becomes a searchable document, the sidecar adds its metadata, the delete removes both, and
    the poison batch reports exactly its broken messages for retry (the queue's redrive sends them on to
    the DLQ after three receives)."""
    from retrieval_core.container import get_document_service
    from tests.functional.test_ingest_handler import BUCKET, KEY, SIDECAR, TEXT

    (function,) = [fn for fn in bundle.functions if fn.name == "IngestFunction"]
    assert [layer.name for layer in function.layer_dirs] == ["RetrievalCoreLayer", "ParsersLayer"]
    documents = get_document_service()
    if "handbook" in {s.name for s in documents.list_stores(prefix="handbook")[0]}:
        documents.delete_store("handbook")
    s3 = moto.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key=KEY, Body=TEXT, ContentType="text/plain")
    s3.put_object(Bucket=BUCKET, Key=f"{KEY}.metadata.json", Body=SIDECAR, ContentType="application/json")
    table = f"IdempotencyTable-{uuid.uuid4().hex[:8]}"
    create_idempotency_table(moto.client("dynamodb"), table)
    parameters = PARAMETERS | {"OpenAIBaseUrl": embeddings_server.base_url}
    physical_ids = {"IdempotencyTable": table, "DocumentsBucket": BUCKET}
    environment = function.environment(parameters, {"CacheTable": cache_table.name, **physical_ids})
    assert environment["DOCUMENTS_BUCKET"] == BUCKET and environment["IDEMPOTENCY_TABLE_NAME"] == table

    def run(*names: str) -> Invocation:
        return invoke_built(
            bundle,
            function,
            [EVENTS_DIR / name for name in names],
            parameters,
            cache_table,
            {"DATABASE_URL": postgres_dsn, "S3_ENDPOINT_URL": moto.endpoint_url},
            tmp_path,
            physical_ids,
        )

    try:
        applied = run("sqs-ingest-put.json", "sqs-ingest-sidecar.json")
        assert applied.responses == [{"batchItemFailures": []}] * 2, applied.output[-3000:]
        assert not {"torch", "numpy", "boto3", "pypdf", "lxml"} & set(applied.modules_at_import)
        assert "Traceback" not in applied.output
        (document,) = documents.list_documents("handbook")[0]
        assert document.id == "policies/travel expenses+été.txt"
        assert document.metadata["department"] == "Finance" and document.metadata["owner"] == "Ana Ruiz"

        s3.delete_object(Bucket=BUCKET, Key=f"{KEY}.metadata.json")
        s3.delete_object(Bucket=BUCKET, Key=KEY)
        poison = json.loads((EVENTS_DIR / "sqs-ingest-poison.json").read_text())
        removed = run("sqs-ingest-delete.json", "sqs-ingest-poison.json")
        assert removed.responses == [
            {"batchItemFailures": []},
            {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in poison["Records"][:2]]},
        ]
        assert documents.list_documents("handbook")[0] == []
    finally:
        if "handbook" in {s.name for s in documents.list_stores(prefix="handbook")[0]}:
            documents.delete_store("handbook")


def test_the_built_migrate_function_answers_cloudformation_like_lambda(
    bundle: Bundle, private_postgres: Any, cache_table: CacheTable, tmp_path: Path
) -> None:
    """events/cfn-migrate-*.json through the built MigrateFunction: Create migrates an empty database and
    answers SUCCESS on the ResponseURL (a local server standing in for the pre-signed S3 URL), Update
    re-runs and applies nothing, Delete answers without touching the data."""
    import psycopg

    from retrieval_core.db.migrations.steps import SCHEMA_VERSION
    from tests.fakes.http import FakeHTTPServer, Reply

    (function,) = [fn for fn in bundle.functions if fn.name == "MigrateFunction"]
    assert function.handler == "app.handler"
    dsn = str(private_postgres.get_uri())  # type: ignore[attr-defined]
    with FakeHTTPServer() as s3:
        s3.add_route("PUT", r"/.*", lambda request, match: Reply(200, b""))
        events = []
        for kind in ("create", "update", "delete"):
            event = json.loads((EVENTS_DIR / f"cfn-migrate-{kind}.json").read_text())
            event["ResponseURL"] = s3.url + event["ResponseURL"].removeprefix("http://127.0.0.1:1")
            path = tmp_path / f"cfn-migrate-{kind}.json"
            path.write_text(json.dumps(event))
            events.append(path)
        run = invoke_built(bundle, function, events, PARAMETERS, cache_table, {"DATABASE_URL": dsn}, tmp_path)
        answers = [json.loads(request.body) for request in s3.requests_to("PUT", r"/.*")]

    assert "Traceback" not in run.output, run.output[-3000:]
    heavy = {"boto3", "httpx", "fastapi", "numpy"} & set(run.modules_at_import)
    assert not heavy, f"the migrate function imports {heavy} at cold start"
    assert [a["Status"] for a in answers] == ["SUCCESS"] * 3, answers
    assert [a["LogicalResourceId"] for a in answers] == ["DatabaseSchema"] * 3
    assert {a["PhysicalResourceId"] for a in answers} == {"retrieval-schema"}
    created, updated = answers[0]["Data"], answers[1]["Data"]
    assert created["Applied"] == ",".join(str(v) for v in range(1, SCHEMA_VERSION + 1))
    assert updated["Applied"] == "" and updated["SchemaVersion"] == str(SCHEMA_VERSION)
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
    assert row is not None and row[0] == SCHEMA_VERSION  # Delete dropped nothing
    assert dsn.split("@")[0] not in run.output  # no connection string (with its password) in the logs
