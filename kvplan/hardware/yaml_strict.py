"""Strict YAML for kvplan's own files (GPU and host profiles, links, prices): one-line errors, hostile documents
refused fast (more than MAX_YAML_BYTES of text, MAX_YAML_NODES values once aliases are expanded, a key given
twice in one mapping). PyYAML is imported on first use, so importing a profile module stays cheap.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from kvplan.core.errors import EXIT_USAGE, KvplanError

MAX_YAML_BYTES = 1 << 20  # a profile or prices file is a few kB; as for config.json (hub.MAX_CONFIG_BYTES)
MAX_YAML_NODES = 10_000  # values in one document, aliases expanded: real files have under a hundred


def show(value: Any) -> str:
    """A value as a one-line error quotes it: its repr on one line, at most 60 characters."""
    text = repr(value).replace("\n", " ")
    return text if len(text) <= 60 else text[:57] + "..."


class _DuplicateKey(Exception):
    """A mapping in a YAML file names one key twice."""


@lru_cache(maxsize=1)
def _strict_loader():
    """A safe YAML loader that refuses a mapping naming one key twice (PyYAML keeps the last one)."""
    import yaml  # deferred: keeps `import kvplan.hardware.gpus` cheap

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class StrictLoader(base):
        def construct_mapping(self, node, deep=False):
            if isinstance(node, yaml.MappingNode):
                seen: dict = {}
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue  # `<<: *base` may override; only keys written out count
                    key = self.construct_object(key_node, deep=True)
                    try:
                        first = seen.setdefault(key, key_node)
                    except TypeError:  # an unhashable key: the base class reports it
                        continue
                    if first is not key_node:
                        raise _DuplicateKey(f"key {show(key)} is given twice (lines {first.start_mark.line + 1} "
                                            f"and {key_node.start_mark.line + 1})")
            return super().construct_mapping(node, deep=deep)

    return StrictLoader


def _count_nodes(root, where: str) -> None:
    """Refuse a document of more than MAX_YAML_NODES nodes, aliases counted as what they expand to.

    Anchors and aliases let a few hundred bytes stand for billions of values (a "billion laughs"
    document), and an alias inside its own anchor makes a cycle; the walk stops at the limit.
    """
    seen, stack = 0, [root]
    while stack:
        node = stack.pop()
        seen += 1
        if seen > MAX_YAML_NODES:
            raise KvplanError(f"{where}: more than {MAX_YAML_NODES:,} values (counting what aliases repeat); "
                              "not a kvplan file", EXIT_USAGE)
        value = node.value
        if isinstance(value, list):
            for item in value:
                stack.extend(item if isinstance(item, tuple) else (item,))


def load_yaml_strict(text: str, where: str) -> Any:
    """Parse YAML safely; a syntax error or a key given twice in one mapping is a one-line KvplanError.

    `where` starts the message ("prices file p.yaml", "hw profile x.yaml"); the line and column
    of the problem follow. Shared by the GPU profiles and the prices file. Hostile documents fail
    fast: more than MAX_YAML_BYTES of text, or more than MAX_YAML_NODES values once aliases are expanded.
    """
    import yaml

    if len(text) > MAX_YAML_BYTES:
        raise KvplanError(f"{where}: larger than {MAX_YAML_BYTES // 2**20} MiB; not a kvplan file", EXIT_USAGE)
    loader = _strict_loader()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _count_nodes(node, where)
        return loader.construct_document(node)
    except _DuplicateKey as exc:
        raise KvplanError(f"{where}: {exc}", EXIT_USAGE) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise KvplanError(f"{where}: invalid YAML{at}: {problem}", EXIT_USAGE) from None
    except RecursionError:  # nesting deeper than the parser's stack: no real profile or prices file
        raise KvplanError(f"{where}: nested too deeply; not a kvplan file", EXIT_USAGE) from None
    finally:
        loader.dispose()
