"""The checker's logic on small fabricated sources (runs offline)."""

from __future__ import annotations

import ast
import inspect
import textwrap

import pytest

from compat_check import DictTree, Index, T, args_to_params, check

P, K = T.Param, T.ParamKind


def tree(**files: str) -> Index:
    """An index over fabricated files: keyword ``pkg__mod`` is ``pkg/mod.py``."""
    return Index(
        DictTree(
            {
                name.replace("__", "/") + ".py": textwrap.dedent(text)
                for name, text in files.items()
            },
            label="eng 9.9",
        )
    )


def method(qualname: str, *params: object, module: str = "eng.worker", **kw: object) -> object:
    fields = {
        "key": "eng.test",
        "framework": T.Framework.VLLM,
        "point": "test",
        "module": module,
        "action": T.Action.NEW_EPOCH,
        "need": T.Need.OPTIONAL,
        "why": "test",
    }
    fields.update(kw)
    return T.MethodTarget(qualname=qualname, params=tuple(params), **fields)


def call(function: str, callee: str, module: str = "eng.worker", **kw: object) -> object:
    fields = {
        "key": "eng.call",
        "framework": T.Framework.VLLM,
        "point": "test",
        "module": module,
        "action": T.Action.LOAD_PLUGIN,
        "need": T.Need.REQUIRED,
        "why": "test",
    }
    fields.update(kw)
    return T.CallTarget(function=function, callee=callee, **fields)


SELF = P("self")
WORKER = """
class Worker:
    def wake_up(self, tags: list[str] | None = None) -> None:
        self.model_runner = None

    def load_model(self, *, load_dummy_weights: bool = False) -> None:
        pass
"""


def test_method_found_with_the_expected_parameters() -> None:
    result = check(
        method("Worker.wake_up", SELF, P("tags", default=True)), tree(eng__worker=WORKER)
    )
    assert result.ok, result.message()
    assert result.found == "eng/worker.py:3 Worker.wake_up(self, tags=...)"
    assert "eng 9.9: eng.worker.Worker.wake_up [eng.test: optional, new-epoch]: ok" in (
        result.message()
    )


def test_renamed_parameter_is_named() -> None:
    source = WORKER.replace("tags: list", "labels: list").replace(
        "= None) -> None:\n", "= None):\n"
    )
    result = check(
        method("Worker.wake_up", SELF, P("tags", default=True)), tree(eng__worker=source)
    )
    assert not result.ok
    assert "parameter 'tags' missing: 'labels' at position 2" in result.message()
    assert "expected (self, tags=...)" in result.message()


def test_moved_parameter_names_both_positions() -> None:
    source = "class Worker:\n    def wake_up(self, level, tags=None): ...\n"
    result = check(
        method("Worker.wake_up", SELF, P("tags", default=True)), tree(eng__worker=source)
    )
    assert result.problems[0].startswith(
        "parameter 'tags' moved from position 2 to position 3 ('level' at position 2)"
    )


def test_keyword_only_turned_positional_fails() -> None:
    source = "class Worker:\n    def load_model(self, load_dummy_weights=False): ...\n"
    target = method("Worker.load_model", SELF, P("load_dummy_weights", K.KEYWORD, True))
    result = check(target, tree(eng__worker=source))
    assert "parameter 'load_dummy_weights' is positional-or-keyword, expected keyword-only" in (
        result.message()
    )


def test_lost_default_fails() -> None:
    source = "class Worker:\n    def wake_up(self, tags): ...\n"
    result = check(
        method("Worker.wake_up", SELF, P("tags", default=True)), tree(eng__worker=source)
    )
    assert "parameter 'tags' lost its default" in result.message()


def test_var_args_expected_but_gone() -> None:
    source = "class Worker:\n    def reload_weights(self, path): ...\n"
    target = method(
        "Worker.reload_weights", SELF, P("args", K.VAR_POSITIONAL), P("kwargs", K.VAR_KEYWORD)
    )
    problems = check(target, tree(eng__worker=source)).problems
    assert len(problems) == 2
    assert problems[0].startswith("no *args")
    assert problems[1].startswith("no **kwargs")


def test_new_required_parameter_fails_only_where_the_plugin_calls() -> None:
    source = "class Worker:\n    def get_model(self, which): ...\n"
    patched = method("Worker.get_model", SELF)
    called = method("Worker.get_model", SELF, action=T.Action.READ)
    assert check(patched, tree(eng__worker=source)).ok
    result = check(called, tree(eng__worker=source))
    assert "new required parameter 'which' (the plugin calls this)" in result.message()


def test_moved_method_names_where_it_went() -> None:
    index = tree(
        eng__worker="class Worker:\n    pass\n",
        eng__managers__updater="class Manager:\n    def wake_up(self, recv_req): ...\n",
    )
    result = check(method("Worker.wake_up", SELF, P("recv_req")), index)
    assert not result.ok
    assert "class Worker (eng/worker.py:1) has no wake_up" in result.message()
    assert "def wake_up is defined at: eng/managers/updater.py:2 Manager.wake_up" in (
        result.message()
    )


def test_renamed_method_suggests_close_names() -> None:
    source = "class Runner:\n    def init_cuda_graphs(self): ...\n    def load_model(self): ...\n"
    result = check(method("Runner.init_device_graphs", SELF), tree(eng__worker=source))
    assert "similar in Runner: init_cuda_graphs" in result.message()
    assert "no def init_device_graphs anywhere in eng 9.9" in result.message()
    assert "class Runner is defined" not in result.message()


def test_missing_module_is_named_and_the_class_searched() -> None:
    index = tree(eng__new_worker=WORKER)
    result = check(method("Worker.wake_up", SELF, P("tags", default=True)), index)
    message = result.message()
    assert "module eng.worker is not in the wheel (no eng/worker.py or eng/worker/__init__.py)" in (
        message
    )
    assert "class Worker is defined at: eng/new_worker.py:2 Worker" in message


def test_nothing_anywhere_says_so() -> None:
    result = check(method("Worker.sleep", SELF), tree(eng__worker=WORKER))
    assert result.problems == [
        "class Worker (eng/worker.py:2) has no sleep",
        "no def sleep anywhere in eng 9.9",
    ]


def test_class_reexported_from_another_module_is_followed() -> None:
    index = tree(
        eng__worker="from eng.impl.gpu import Worker as Worker\n",
        eng__impl__gpu=WORKER,
    )
    result = check(method("Worker.wake_up", SELF, P("tags", default=True)), index)
    assert result.ok, result.message()
    assert result.found.startswith("eng/impl/gpu.py:3 ")


def test_relative_import_and_package_init_are_followed() -> None:
    files = {
        "eng/plugins/__init__.py": "from .registry import Hooks\n",
        "eng/plugins/registry.py": WORKER.replace("Worker", "Hooks"),
    }
    index = Index(DictTree(files))
    result = check(
        method("Hooks.wake_up", SELF, P("tags", default=True), module="eng.plugins"), index
    )
    assert result.ok, result.message()


def test_inherited_method_is_found_in_a_base_from_another_module() -> None:
    index = tree(
        eng__base=WORKER.replace("class Worker", "class WorkerBase"),
        eng__worker="from eng import base\n\nclass Worker(base.WorkerBase):\n    pass\n",
    )
    result = check(method("Worker.wake_up", SELF, P("tags", default=True)), index)
    assert result.ok, result.message()
    assert result.found == "eng/base.py:3 WorkerBase.wake_up(self, tags=...)"


def test_unresolved_base_is_reported() -> None:
    source = "from torch import nn\n\nclass Worker(nn.Module, Mystery):\n    pass\n"
    result = check(method("Worker.wake_up", SELF), tree(eng__worker=source))
    assert "(bases not followed: nn.Module, Mystery)" in result.message()


def test_property_and_async_are_not_plain_methods() -> None:
    source = textwrap.dedent(
        """
        class Worker:
            @property
            def model(self): ...

            async def wake_up(self, tags=None): ...
        """
    )
    index = tree(eng__worker=source)
    assert (
        "is a @property, not a plain method" in check(method("Worker.model", SELF), index).message()
    )
    result = check(method("Worker.wake_up", SELF, P("tags", default=True)), index)
    assert "is async: the plugin's wrappers assume a plain call" in result.message()


def test_method_defined_by_assignment_cannot_be_checked() -> None:
    source = "def _impl(self): ...\n\nclass Worker:\n    wake_up = _impl\n"
    result = check(method("Worker.wake_up", SELF), tree(eng__worker=source))
    assert "is not a def here ('wake_up = _impl'): its parameters cannot be checked" in (
        result.message()
    )


def attribute(qualname: str, module: str = "eng.worker") -> object:
    return T.AttributeTarget(
        key="eng.attr",
        framework=T.Framework.SGLANG,
        point="io",
        module=module,
        qualname=qualname,
        action=T.Action.READ,
        need=T.Need.OPTIONAL,
        why="test",
    )


@pytest.mark.parametrize(
    ("source", "qualname"),
    [
        ("class Req:\n    tags: list[str] | None = None\n", "Req.tags"),
        ("import enum\nclass HookType(enum.Enum):\n    AFTER = 'after'\n", "HookType.AFTER"),
        (
            "class Worker:\n    def __init__(self):\n        self.vllm_config = 1\n",
            "Worker.vllm_config",
        ),
        ("class Runner:\n    def load(self):\n        self.model: object = None\n", "Runner.model"),
    ],
)
def test_attribute_forms_are_found(source: str, qualname: str) -> None:
    result = check(attribute(qualname), tree(eng__worker=source))
    assert result.ok, result.message()


def test_attribute_missing_names_the_class() -> None:
    source = "class Req:\n    tag_names: list[str] | None = None\n"
    result = check(attribute("Req.tags"), tree(eng__worker=source))
    assert not result.ok
    assert "class Req (eng/worker.py:1) has no tags; similar in Req: tag_names" in (
        result.message()
    )
    assert "class Req is defined at: eng/worker.py:1 Req" in result.message()


def constant(name: str, value: str) -> object:
    return T.ConstantTarget(
        key="eng.const",
        framework=T.Framework.VLLM,
        point="plugin",
        module="eng.plugins",
        name=name,
        value=value,
        action=T.Action.LOAD_PLUGIN,
        need=T.Need.REQUIRED,
        why="test",
    )


def test_constant_value_is_compared() -> None:
    index = tree(eng__plugins='GROUP = "eng.general_plugins"\nOTHER: str = "x"\n')
    assert check(constant("GROUP", "eng.general_plugins"), index).ok
    assert check(constant("OTHER", "x"), index).ok
    result = check(constant("GROUP", "eng.plugins"), index)
    assert "GROUP is 'eng.general_plugins', expected 'eng.plugins'" in result.message()


def test_constant_not_literal_or_missing() -> None:
    index = tree(eng__plugins="GROUP = make_group()\n")
    assert "GROUP = make_group() is not a literal" in check(constant("GROUP", "g"), index).message()
    assert check(constant("NAME", "g"), index).problems == [
        "eng/plugins.py defines no NAME",
        "no module-level NAME anywhere in eng 9.9",
    ]


def test_moved_constant_names_where_it_is_assigned() -> None:
    index = tree(eng__plugins="\n", eng__plugins_v2='X = 1\nGROUP: str = "g"\n')
    result = check(constant("GROUP", "g"), index)
    assert "GROUP is assigned at: eng/plugins_v2.py:2 GROUP" in result.message()


ENGINE = textwrap.dedent(
    """
    from importlib.metadata import entry_points

    class Executor:
        def wake_up(self, tags=None):
            self.collective_rpc("wake_up", kwargs=dict(tags=tags))

        def sleep(self, level=1):
            self.collective_rpc("sleep", kwargs=dict(level=level))

    class Worker:
        def compile_or_warm_up_model(self):
            return self._compile()

        def _compile(self):
            self.model_runner.capture_model()

    def load(group):
        return entry_points(group=group)

    def wrap(hook, original):
        def after(*args, **kwargs):
            result = original(*args, **kwargs)
            return hook(result, *args, **kwargs)
        return after
    """
)


def test_call_with_positional_string_in_either_quote_style() -> None:
    index = tree(eng__worker=ENGINE)
    assert check(call("Executor.wake_up", "collective_rpc", positional=('"wake_up"',)), index).ok
    result = check(call("Executor.wake_up", "collective_rpc", positional=("'wake_up'",)), index)
    assert result.found == "eng/worker.py:6 self.collective_rpc('wake_up', kwargs=dict(tags=tags))"


def test_call_with_other_arguments_lists_the_calls_found() -> None:
    index = tree(eng__worker=ENGINE)
    result = check(call("Executor.sleep", "collective_rpc", positional=("'wake_up'",)), index)
    assert "no call collective_rpc('wake_up') in Executor.sleep (eng/worker.py:8)" in (
        result.message()
    )
    assert "calls to collective_rpc there: eng/worker.py:9 self.collective_rpc('sleep'" in (
        result.message()
    )


def test_call_keywords_and_star_arguments() -> None:
    index = tree(eng__worker=ENGINE)
    assert check(call("load", "entry_points", keywords=("group = group",)), index).ok
    assert check(call("load", "entry_points", keywords=("group",)), index).ok
    assert not check(call("load", "entry_points", keywords=("group=other",)), index).ok
    after = call("wrap", "hook", positional=("result", "*args"), keywords=("**kwargs",))
    assert check(after, index).ok
    before = call("wrap", "hook", positional=("*args",))
    assert not check(before, index).ok


def test_call_reached_through_a_helper_needs_depth() -> None:
    index = tree(eng__worker=ENGINE)
    shallow = call("Worker.compile_or_warm_up_model", "self.model_runner.capture_model")
    result = check(shallow, index)
    assert "no call self.model_runner.capture_model() in Worker.compile_or_warm_up_model" in (
        result.message()
    )
    deep = call("Worker.compile_or_warm_up_model", "capture_model", depth=1)
    result = check(deep, index)
    assert result.ok, result.message()
    assert result.found.startswith("eng/worker.py:16 self.model_runner.capture_model()")
    assert (
        "or the methods it calls on self"
        in check(call("Worker.compile_or_warm_up_model", "missing", depth=1), index).message()
    )


def test_call_in_a_missing_function() -> None:
    result = check(call("Executor.discard", "collective_rpc"), tree(eng__worker=ENGINE))
    assert "class Executor (eng/worker.py:4) has no discard" in result.message()


@pytest.mark.parametrize(
    "signature",
    [
        "(self, tags=None)",
        "(self, *, load_dummy_weights=False)",
        "(self, *args, **kwargs)",
        "(a, b=1, /, c=2, *rest, d, e=3, **extra)",
        "(cls, target, hook, hook_type=None, *, source=None)",
    ],
)
def test_ast_parameters_agree_with_inspect(signature: str) -> None:
    # The plugins take a live signature (inspect), the tier a parsed one (ast): same Params.
    source = f"def f{signature}: pass\n"
    namespace: dict[str, object] = {}
    exec(source, namespace)  # noqa: S102 - a fabricated one-line function
    live = T.params_from_signature(inspect.signature(namespace["f"]))  # type: ignore[arg-type]
    parsed = args_to_params(ast.parse(source).body[0].args)  # type: ignore[attr-defined]
    assert parsed == live
    assert T.format_params(parsed) == signature.replace("=None", "=...").replace(
        "=False", "=..."
    ).replace("=1", "=...").replace("=2", "=...").replace("=3", "=...")
