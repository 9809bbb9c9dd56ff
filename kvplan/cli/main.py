"""The `kvplan` Typer app and `main`: the command modules by name, each imported only when its command runs.

Command modules never import this one (they import kvplan.cli._common), so there is no cycle;
each defines its commands at module level and offers `register(app)`. `main` imports the one
module the command line names (`app_for`); the whole app (`whole_app`, kvplan.cli.app) imports
them all. A command module imports what its command needs at module level, so this is the one
place the CLI defers imports for its start-up.
"""

import inspect
import sys
from functools import lru_cache
from importlib import import_module
from typing import Annotated

import typer
from typer.core import TyperArgument, TyperCommand

from kvplan import __version__
from kvplan.cli._common import EXIT_INTERRUPTED, error_line
from kvplan.core.errors import EXIT_USAGE

MAX_OPTION_CHARS = 200  # longer "--name" arguments are refused before the parser sees them (see main)

# Command name -> the module of kvplan.cli that registers it (`models` is a group of commands).
COMMANDS = {"fit": "fit", "gpus": "gpus", "models": "models", "sweep": "sweep", "cheapest": "cheapest",
            "disagg": "disagg",
            "simulate": "simulate", "check-log": "check_log", "validate": "validate",
            "check-bench": "check_bench", "step-times": "step_times"}


def command_module(name: str):
    """The module that registers command `name`, imported now (by name: the others stay unimported)."""
    return import_module(f"{__package__}.{COMMANDS[name]}")


def _version(value: bool) -> None:
    if value:
        print(f"kvplan {__version__}")
        raise typer.Exit(0)


def _root(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                help="Print kvplan's version and exit.")] = False) -> None:
    """KV-cache capacity planner for LLM serving: does it fit, how many users, how long a context, how many GPUs."""


def _plain_usage_metavars() -> None:
    """typer (0.28) writes a required argument as `{model}` in a usage line (issue 25); kvplan's usage reads
    `kvplan fit [OPTIONS] MODEL`, as click writes it and as the help text names it."""
    original = TyperArgument.make_metavar
    if getattr(original, "kvplan_plain", False):
        return

    def make_metavar(self, ctx, *, usage: bool = False) -> str:
        var = original(self, ctx, usage=usage)
        return var[1:-1] if usage and var.startswith("{") and var.endswith("}") else var

    make_metavar.kvplan_plain = True
    TyperArgument.make_metavar = make_metavar


def given_more_than_once(command, args: list[str]):
    """(the parameter, how often it appears) for the first list option of `command` (one value, comma-separated,
    as its help says) that appears more than once in `args`, else None. The parser keeps the last of them without
    a word, so `cheapest --gpu h100 --gpu a100` would plan the A100 alone where the user meant both. An option of
    one value keeps the last as any command line does (`alias kfit='kvplan fit --gpu h100'; kfit MODEL --gpu a100`
    plans the A100), and options declared to repeat (`--engine-opt`) are not counted."""
    lists = {name: param for param in command.params
             if param.param_type_name == "option" and not (param.multiple or param.count or param.is_flag)
             and "comma-separated" in (param.help or "").lower()
             for name in param.opts}
    seen = []
    for arg in args:
        if arg == "--":
            break
        param = lists.get(arg.split("=", 1)[0] if arg.startswith("--") else arg[:2] if arg.startswith("-") else "")
        if param is not None:
            seen.append(param)
    twice = next((param for param in seen if seen.count(param) > 1), None)
    return (twice, seen.count(twice)) if twice is not None else None


def model_in_words(command, ctx, args: list[str]):
    """(the MODEL argument, its words) for a MODEL typed with spaces (`kvplan fit llama 3.1 8b --gpu h100`: ["llama",
    "3.1", "8b"]) where `command` takes one MODEL argument and nothing else positional, else None. Click would say
    "Missing option" or "Got unexpected extra argument(s) (3.1 8b)", neither of which says what went wrong."""
    positional = [p for p in command.params if p.param_type_name == "argument"]
    if len(positional) != 1 or positional[0].name not in ("model", "name") or positional[0].nargs != 1:
        return None
    try:  # the parser alone: which words are not options or their values (no option is checked yet)
        given, extra, _ = command.make_parser(ctx).parse_args(args=list(args))
    except Exception:  # noqa: BLE001 - an unknown option, a flag without its value: the parse below says it
        return None  # (typer vendors click: its UsageError is typer's private class, not click's)
    first = given.get(positional[0].name)
    spaced = _words_after_model(command, args) if extra and isinstance(first, str) else []
    return (positional[0], [first, *spaced]) if spaced else None


def _words_after_model(command, args: list[str]) -> list[str]:
    """The words typed directly after the MODEL argument, before any option: a name typed with spaces. A word after
    an option's value (`--gpu h100 a100`) is an extra argument, as Click says."""
    flags = {opt for p in command.params if p.param_type_name == "option" and (p.is_flag or p.count)
             for opt in (*p.opts, *p.secondary_opts)}
    at = 0
    while at < len(args) and args[at] != "--" and args[at].startswith("-") and len(args[at]) > 1:
        takes_value = "=" not in args[at] and args[at] not in flags
        at += 2 if takes_value else 1  # an option and its value, or a flag
    if at >= len(args) or args[at] == "--":
        return []
    words = []
    for word in args[at + 1:]:
        if word.startswith("-"):
            break
        words.append(word)
    return words


def spaced_model_message(words: list[str]):
    """One line for a MODEL typed as several words: the catalog name they make with dashes (`llama-3.1-8b`), or the
    catalog's nearest names, or to quote a path; None where the first word alone is a catalog name (then Click's
    "unexpected extra argument" is the right error)."""
    from kvplan.sources.catalog import find_in_catalog, suggest  # the catalog (0.1 s) only on this mistake

    dashed = "-".join(words).lower()
    said = f"{len(words)} words ({' '.join(words)}); a model name is one word (or quoted)"
    if "/" in words[0]:  # a folder, a file or a Hub id: a path with spaces needs quotes, a repo id has none
        return f"{said}; quote a path that has spaces: \"{' '.join(words)}\""
    if find_in_catalog(dashed) is not None:
        return f"{said}: did you mean {dashed}?"
    if find_in_catalog(words[0]) is not None:
        return None
    close = suggest(dashed)
    return f"{said}: did you mean {', '.join(close)}?" if close else f"{said}; `kvplan models list` names them all"


def _refuse_repeated_options() -> None:
    """A command's parser refuses a list option given more than once (given_more_than_once), as a usage error
    (one line, exit 2, as any bad value), where it would keep the last list silently; and a MODEL typed in several
    words (model_in_words), where Click's error would name a missing option or extra arguments."""
    original = TyperCommand.parse_args
    if getattr(original, "kvplan_once", False):
        return

    def parse_args(self, ctx, args):
        repeated = given_more_than_once(self, args)
        if repeated:
            param, times = repeated
            raise typer.BadParameter(f"given {times} times; give its values as one comma-separated list",
                                     ctx=ctx, param=param)
        spaced = None if "--help" in args else model_in_words(self, ctx, args)
        message = spaced_model_message(spaced[1]) if spaced else None
        if message:
            raise typer.BadParameter(message, ctx=ctx, param=spaced[0])
        return original(self, ctx, args)

    parse_args.kvplan_once = True
    TyperCommand.parse_args = parse_args


def make_app(modules) -> typer.Typer:
    """The kvplan app with the commands of `modules`."""
    _plain_usage_metavars()
    _refuse_repeated_options()
    new = typer.Typer(
        name="kvplan",
        help="KV-cache capacity planner for LLM serving: does it fit, how many users, how long a context, how many "
             "GPUs.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    for module in modules:
        module.register(new)
    for info in new.registered_commands:
        info.help = reflowed(info.help or inspect.getdoc(info.callback) or "")
    new.callback()(_root)
    return new


def reflowed(doc: str) -> str:
    """A command's docstring with each paragraph's lines joined: Rich's help keeps a paragraph's single line breaks,
    so a docstring wrapped at the source's width came out ragged at a terminal's (a line of 95 characters broken
    after its 80th, then a short one)."""
    return "\n\n".join(" ".join(line.strip() for line in para.splitlines()) for para in doc.split("\n\n"))


@lru_cache(maxsize=1)
def whole_app() -> typer.Typer:
    """The app with every command (--help, --version, no or an unknown command; tests and scripts)."""
    return make_app(tuple(command_module(name) for name in COMMANDS))


def app_for(args: list[str]) -> typer.Typer:
    """The app that runs `kvplan ARGS`: when ARGS start with a command's name, one with that command
    only, and only that command's module imported. Typer turns every registered command and its options
    into Click objects on each start (~20 ms, a twelfth of `fit`'s cold start); the one named is all a
    run needs, and its help, usage and errors read the same (`kvplan fit ...`). Otherwise (--help,
    --version, no or an unknown command) the whole app."""
    if not args or args[0] not in COMMANDS:
        return whole_app()
    return make_app((command_module(args[0]),))


def main() -> None:
    """Console entry point: the app, with the parser's own usage errors also as one line.

    Typer prints a bad flag value (`--batch abc`) as a boxed, multi-line usage message; kvplan's
    rule is one `Error:` line and exit 2, so the parser runs in non-standalone mode and its usage
    errors (they carry format_message and exit_code) are printed here.
    """
    for arg in sys.argv[1:]:  # Click's "did you mean" for an unknown option is quadratic in its length
        if arg.startswith("--") and len(arg) > MAX_OPTION_CHARS and "=" not in arg[:MAX_OPTION_CHARS]:
            error_line(f"Error: no such option: {arg[:40]}... ({len(arg):,} characters)")
            sys.exit(EXIT_USAGE)
    try:
        code = app_for(sys.argv[1:])(standalone_mode=False)
    except typer.Abort:
        error_line("Error: aborted")
        code = EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - only the parser's usage errors are handled here
        if not (hasattr(exc, "format_message") and isinstance(getattr(exc, "exit_code", None), int)):
            raise
        message = " ".join(exc.format_message().split())
        if message:  # (no arguments at all: the help was printed, nothing to add)
            ctx = getattr(exc, "ctx", None)
            hint = f" ({_two_dashes(ctx)}see: {ctx.command_path} --help)" if ctx is not None else ""
            error_line(f"Error: {message}{hint}")
        code = exc.exit_code
    sys.exit(code if isinstance(code, int) else 0)


def _two_dashes(ctx) -> str:
    """"long options take two dashes: --gpu; " where the command line has `-gpu` and the command a `--gpu` (Click read
    it as -g with the value "pu", and the value after it as an extra argument)."""
    opts = {o for p in getattr(ctx.command, "params", ()) for o in getattr(p, "opts", ())}
    typed = next((a for a in sys.argv[1:] if a[:1] == "-" and a[1:2].isalpha() and "-" + a in opts), None)
    return f"long options take two dashes: -{typed}; " if typed else ""
