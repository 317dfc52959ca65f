#!/usr/bin/env python3
"""Read the scheduler-relevant facts of one nova release from its own source.

Only Python's ``ast`` module reads the tree: nothing of nova is imported, so no
dependency of nova is needed. Every fact is found by a pattern of the source;
when a pattern is not found (a release changed shape) this fails with a message
naming the file and the pattern, rather than writing a guess.

    scripts/release_facts.py SOURCE_ROOT SERIES NOVA_VERSION OUT_JSON

SOURCE_ROOT is the directory holding the release's ``nova/`` package (an
unpacked wheel or sdist). Called by scripts/release_facts.sh.
"""

import ast
import builtins
import json
import os
import sys

GENERATED_BY = "scripts/release_facts.sh"

OPTION_GROUPS = ("scheduler", "filter_scheduler", "metrics")

OBJECTS = (
    "RequestSpec", "ImageMetaProps", "Selection", "Flavor",
    "InstancePCIRequest", "ComputeNode", "Service", "RequestGroup",
    "Destination", "SchedulerRetries", "SchedulerLimits", "NUMATopology",
    "InstanceNUMATopology", "HostMapping", "CellMapping",
)
PAYLOADS = ("RequestSpecPayload", "ImageMetaPropsPayload")

TENANT_KEY = "filter_tenant_id"


class ShapeError(Exception):
    """The source does not have the shape this script reads."""


def fail(where, what):
    raise ShapeError(f"{where}: {what}")


# --- the source tree: modules, their top-level bindings, name resolution ------

class Entity:
    """What a name or dotted expression of the source stands for."""

    __slots__ = ("kind", "name", "module", "node")

    def __init__(self, kind, name, module=None, node=None):
        self.kind = kind      # 'module' (nova), 'class' (nova), 'external', 'other'
        self.name = name      # dotted module name, class name, or external dotted name
        self.module = module  # the defining nova module of a class
        self.node = node      # the ast.ClassDef of a class

    def key(self):
        return (self.kind, self.module, self.name)


class Tree:
    def __init__(self, root):
        self.root = root
        self._modules = {}
        self._bindings = {}

    def rel(self, path):
        return os.path.relpath(path, self.root)

    def module_path(self, dotted):
        """The file of a nova module or package, or None."""
        if dotted != "nova" and not dotted.startswith("nova."):
            return None
        base = os.path.join(self.root, *dotted.split("."))
        if os.path.isfile(base + ".py"):
            return base + ".py"
        init = os.path.join(base, "__init__.py")
        if os.path.isfile(init):
            return init
        return None

    def parse(self, dotted):
        if dotted not in self._modules:
            path = self.module_path(dotted)
            if path is None:
                fail(dotted, "no such module in the release's tree")
            with open(path, encoding="utf-8") as f:
                self._modules[dotted] = (path, ast.parse(f.read(), path))
        return self._modules[dotted]

    def tree(self, dotted):
        return self.parse(dotted)[1]

    def where(self, dotted):
        return self.rel(self.parse(dotted)[0])

    def is_package(self, dotted):
        path = self.module_path(dotted)
        return path is not None and path.endswith("__init__.py")

    def bindings(self, dotted):
        """Top-level names of a module (also under module-level if/try)."""
        if dotted in self._bindings:
            return self._bindings[dotted]
        out = {}
        package = dotted if self.is_package(dotted) else dotted.rpartition(".")[0]

        def visit(stmts):
            for st in stmts:
                if isinstance(st, ast.ClassDef):
                    out[st.name] = ("class", st)
                elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out[st.name] = ("other", None)
                elif isinstance(st, ast.Import):
                    for a in st.names:
                        if a.asname:
                            out[a.asname] = ("module", a.name)
                        else:
                            top = a.name.split(".")[0]
                            out[top] = ("module", top)
                elif isinstance(st, ast.ImportFrom):
                    src = st.module or ""
                    if st.level:
                        parts = package.split(".")
                        if st.level > 1:
                            parts = parts[: -(st.level - 1)]
                        src = ".".join(parts + ([src] if src else []))
                    for a in st.names:
                        if a.name == "*":
                            fail(self.where(dotted), f"'from {src} import *' is not followed")
                        out[a.asname or a.name] = ("from", (src, a.name))
                elif isinstance(st, (ast.Assign, ast.AnnAssign)):
                    targets = st.targets if isinstance(st, ast.Assign) else [st.target]
                    for t in targets:
                        if isinstance(t, ast.Name):
                            out[t.id] = ("expr", st.value)
                elif isinstance(st, ast.If):
                    visit(st.body)
                    visit(st.orelse)
                elif isinstance(st, ast.Try):
                    visit(st.body)
                    for h in st.handlers:
                        visit(h.body)
                    visit(st.orelse)
                    visit(st.finalbody)

        visit(self.tree(dotted).body)
        self._bindings[dotted] = out
        return out

    def module_entity(self, dotted):
        if self.module_path(dotted) is not None:
            return Entity("module", dotted)
        return Entity("external", dotted)

    def lookup(self, dotted, name, _seen=None):
        """The entity bound to NAME at the top level of nova module DOTTED."""
        seen = _seen or set()
        if (dotted, name) in seen:
            fail(self.where(dotted), f"import cycle resolving {name}")
        seen.add((dotted, name))
        binding = self.bindings(dotted).get(name)
        if binding is None:
            if self.is_package(dotted) and self.module_path(f"{dotted}.{name}"):
                return Entity("module", f"{dotted}.{name}")
            return None
        kind, val = binding
        if kind == "class":
            return Entity("class", name, dotted, val)
        if kind == "module":
            return self.module_entity(val)
        if kind == "from":
            src, attr = val
            if self.module_path(src) is None:
                return Entity("external", f"{src}.{attr}")
            if self.module_path(f"{src}.{attr}") is not None:
                return Entity("module", f"{src}.{attr}")
            found = self.lookup(src, attr, seen)
            if found is None:
                fail(self.where(src), f"'{attr}' (imported by {dotted}) is not defined there")
            return found
        if kind == "expr" and isinstance(val, (ast.Name, ast.Attribute)):
            return self.resolve(dotted, val)
        return Entity("other", name)

    def resolve(self, dotted, expr):
        """The entity an ast.Name / ast.Attribute of module DOTTED stands for."""
        if isinstance(expr, ast.Name):
            found = self.lookup(dotted, expr.id)
            if found is not None:
                return found
            if hasattr(builtins, expr.id):
                return Entity("external", f"builtins.{expr.id}")
            fail(self.where(dotted), f"line {getattr(expr, 'lineno', '?')}: name '{expr.id}' is not defined at module level")
        if isinstance(expr, ast.Attribute):
            base = self.resolve(dotted, expr.value)
            if base.kind == "module":
                found = self.lookup(base.name, expr.attr)
                if found is None:
                    fail(self.where(dotted), f"line {getattr(expr, 'lineno', '?')}: {base.name} has no '{expr.attr}'")
                return found
            if base.kind == "external":
                return Entity("external", f"{base.name}.{expr.attr}")
            fail(self.where(dotted), f"line {getattr(expr, 'lineno', '?')}: cannot follow '{ast.unparse(expr)}'")
        fail(self.where(dotted), f"line {getattr(expr, 'lineno', '?')}: cannot resolve '{ast.unparse(expr)}'")

    def is_subclass(self, cls, target, _stack=()):
        """issubclass(cls, target), read from the class statements' bases."""
        if cls.kind != "class":
            return False
        if cls.key() == target.key():
            return True
        if cls.key() in _stack:
            fail(self.where(cls.module), f"class {cls.name} derives from itself")
        for base in cls.node.bases:
            ent = self.resolve(cls.module, base)
            if self.is_subclass(ent, target, _stack + (cls.key(),)):
                return True
        return False


# --- helpers on the ast ---------------------------------------------------------

def top_level_class(tree, module, name):
    found = [st for st in tree.tree(module).body
             if isinstance(st, ast.ClassDef) and st.name == name]
    if len(found) != 1:
        fail(tree.where(module), f"expected one top-level 'class {name}', found {len(found)}")
    return found[0]


def method(tree, module, cls, name):
    found = [st for st in cls.body
             if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) and st.name == name]
    if len(found) != 1:
        fail(tree.where(module), f"expected one method {cls.name}.{name}, found {len(found)}")
    return found[0]


def top_level_function(tree, module, name):
    found = [st for st in tree.tree(module).body
             if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) and st.name == name]
    if len(found) != 1:
        fail(tree.where(module), f"expected one top-level 'def {name}', found {len(found)}")
    return found[0]


def module_assignments(tree, module, name):
    """The values assigned to NAME by top-level statements of MODULE."""
    values = []
    for st in tree.tree(module).body:
        if isinstance(st, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == name for t in st.targets):
                values.append(st.value)
        elif isinstance(st, ast.AnnAssign):
            if isinstance(st.target, ast.Name) and st.target.id == name and st.value:
                values.append(st.value)
        elif isinstance(st, ast.AugAssign):
            if isinstance(st.target, ast.Name) and st.target.id == name:
                fail(tree.where(module), f"line {st.lineno}: {name} is extended by '{ast.unparse(st)}'")
    return values


def single_assignment(tree, module, name):
    values = module_assignments(tree, module, name)
    if len(values) != 1:
        fail(tree.where(module), f"expected one top-level assignment to {name}, found {len(values)}")
    return values[0]


def never_mutated(tree, module, name):
    """Fail if NAME is changed in place anywhere in MODULE (append, extend, ...)."""
    for node in ast.walk(tree.tree(module)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == name
                and node.func.attr in ("append", "extend", "insert", "remove", "pop", "clear")):
            fail(tree.where(module), f"line {node.lineno}: {name} is changed by '{ast.unparse(node)}'")
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            fail(tree.where(module), f"line {node.lineno}: {name} is changed by '{ast.unparse(node)}'")


def int_constant(node):
    return (isinstance(node, ast.Constant) and type(node.value) is int)


def jsonable(value, where):
    """A literal as JSON: tuples become lists; anything JSON cannot hold fails."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [jsonable(v, where) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: jsonable(v, where) for k, v in value.items()}
    fail(where, f"literal {value!r} has no JSON form")


# --- the facts ------------------------------------------------------------------

def service_version(tree):
    mod = "nova.objects.service"
    value = single_assignment(tree, mod, "SERVICE_VERSION")
    if not int_constant(value):
        fail(tree.where(mod), f"SERVICE_VERSION is not an integer literal: {ast.unparse(value)}")
    history = single_assignment(tree, mod, "SERVICE_VERSION_HISTORY")
    if not isinstance(history, (ast.Tuple, ast.List)):
        fail(tree.where(mod), "SERVICE_VERSION_HISTORY is not a tuple/list literal")
    # nova's own rule (its unit tests): one history entry per version, from 0.
    if len(history.elts) != value.value + 1:
        fail(tree.where(mod), f"SERVICE_VERSION {value.value} but SERVICE_VERSION_HISTORY "
                              f"has {len(history.elts)} entries")
    return value.value


def check_loader_rule(tree):
    """nova.loadables.BaseLoader: every public class of every module (os.walk of the
    package, __init__ skipped) that is a subclass of the loadable type. Fail if the
    code that implements this rule reads differently."""
    mod = "nova.loadables"
    cls = top_level_class(tree, mod, "BaseLoader")
    needles = {
        "_is_correct_class": ("inspect.isclass(obj)", "obj.__name__.startswith('_')",
                              "issubclass(obj, self.loadable_cls_type)"),
        "_get_classes_from_module": ("dir(module)", "obj_name.startswith('_')"),
        "get_all_classes": ("os.walk(self.path)", "root == '__init__'", "ext != '.py'"),
    }
    for name, wanted in needles.items():
        text = ast.unparse(method(tree, mod, cls, name))
        for needle in wanted:
            if needle not in text:
                fail(tree.where(mod), f"BaseLoader.{name} no longer contains '{needle}': "
                                      "the loader's rule changed")
    return Entity("class", "BaseLoader", mod, cls)


def loadable_base(tree, package, all_func, expected_base, base_loader):
    """The class the package's loader collects subclasses of, read from
    `def all_func(): return Handler().get_all_classes()` and the handler's
    `super(...).__init__(Base)`."""
    where = tree.where(package)
    func = top_level_function(tree, package, all_func)
    rets = [n for n in ast.walk(func) if isinstance(n, ast.Return)]
    ok = (len(rets) == 1 and isinstance(rets[0].value, ast.Call)
          and isinstance(rets[0].value.func, ast.Attribute)
          and rets[0].value.func.attr == "get_all_classes"
          and isinstance(rets[0].value.func.value, ast.Call)
          and isinstance(rets[0].value.func.value.func, ast.Name))
    if not ok:
        fail(where, f"{all_func}() is not 'return Handler().get_all_classes()'")
    handler_name = rets[0].value.func.value.func.id
    handler = tree.resolve(package, ast.Name(handler_name))
    if handler.kind != "class" or handler.module != package:
        fail(where, f"{handler_name} is not a class of {package}")
    if not tree.is_subclass(handler, base_loader):
        fail(where, f"{handler_name} does not derive from nova.loadables.BaseLoader")
    init = method(tree, package, handler.node, "__init__")
    bases = [n.args[0] for n in ast.walk(init)
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == "__init__" and isinstance(n.func.value, ast.Call)
             and isinstance(n.func.value.func, ast.Name) and n.func.value.func.id == "super"
             and len(n.args) == 1]
    if len(bases) != 1 or not isinstance(bases[0], (ast.Name, ast.Attribute)):
        fail(where, f"{handler_name}.__init__ does not call super().__init__(<base class>)")
    base = tree.resolve(package, bases[0])
    if base.kind != "class" or base.name != expected_base:
        fail(where, f"{handler_name} loads subclasses of {ast.unparse(bases[0])}, "
                    f"expected {expected_base}")
    return base


def loadable_classes(tree, package, base):
    """Names of the classes the loader finds: public names of the package's modules
    (recursively, __init__ skipped) bound to a class that derives from BASE."""
    pkg_dir = os.path.dirname(tree.module_path(package))
    modules = []
    for dirpath, dirnames, filenames in os.walk(pkg_dir):
        dirnames.sort()
        rel = os.path.relpath(dirpath, pkg_dir)
        sub = "" if rel == "." else "." + ".".join(rel.split(os.sep))
        for fname in sorted(filenames):
            root, ext = os.path.splitext(fname)
            if ext == ".py" and root != "__init__":
                modules.append(f"{package}{sub}.{root}")
    if not modules:
        fail(tree.rel(pkg_dir), "no modules")
    found = {}
    for mod in modules:
        for name in sorted(tree.bindings(mod)):
            if name.startswith("_"):
                continue
            ent = tree.lookup(mod, name)
            if ent is None or ent.kind != "class" or ent.name.startswith("_"):
                continue
            if not tree.is_subclass(ent, base):
                continue
            if ent.module != mod:
                # The loader (dir(module)) would load it here too; this script
                # counts only classes defined in the package's modules.
                fail(tree.where(mod), f"'{name}' is the imported class {ent.module}.{ent.name} "
                                      f"deriving from {base.name}: decide how to count it")
            if ent.name in found and found[ent.name] != mod:
                fail(tree.where(mod), f"class {ent.name} is also defined in {found[ent.name]}")
            found[ent.name] = mod
    found.pop(base.name, None)
    if not found:
        fail(tree.rel(pkg_dir), f"no subclass of {base.name}")
    return sorted(found)


def request_filters(tree):
    mod = "nova.scheduler.request_filter"
    where = tree.where(mod)
    value = single_assignment(tree, mod, "ALL_REQUEST_FILTERS")
    never_mutated(tree, mod, "ALL_REQUEST_FILTERS")
    if not isinstance(value, (ast.List, ast.Tuple)) or not value.elts:
        fail(where, "ALL_REQUEST_FILTERS is not a non-empty list literal")
    functions = {st.name for st in tree.tree(mod).body if isinstance(st, ast.FunctionDef)}
    names = []
    for elt in value.elts:
        if not isinstance(elt, ast.Name):
            fail(where, f"ALL_REQUEST_FILTERS holds '{ast.unparse(elt)}', not a function name")
        if elt.id not in functions:
            fail(where, f"ALL_REQUEST_FILTERS names '{elt.id}', not a function of the module")
        names.append(elt.id)
    if len(set(names)) != len(names):
        fail(where, "ALL_REQUEST_FILTERS names a function twice")
    mins = {}
    for st in tree.tree(mod).body:
        targets = (st.targets if isinstance(st, ast.Assign)
                   else [st.target] if isinstance(st, ast.AnnAssign) else [])
        for t in targets:
            if isinstance(t, ast.Name) and t.id.startswith("MIN_"):
                if not int_constant(st.value):
                    fail(where, f"line {st.lineno}: {t.id} is not an integer literal")
                if t.id in mins:
                    fail(where, f"{t.id} is assigned twice")
                mins[t.id] = st.value.value
    return names, mins


def resource_request_translations(tree):
    mod = "nova.scheduler.utils"
    where = tree.where(mod)
    cls = top_level_class(tree, mod, "ResourceRequest")
    func = method(tree, mod, cls, "from_request_spec")
    receivers = {"self", "cls"}
    for node in ast.walk(func):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name) and node.value.func.id == "cls"):
            receivers.update(t.id for t in node.targets if isinstance(t, ast.Name))
    calls = []
    for node in ast.walk(func):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
        if not name or not name.startswith("_translate_"):
            continue
        if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                and f.value.id in receivers):
            fail(where, f"line {node.lineno}: '{ast.unparse(f)}' is not a method call on "
                        f"{sorted(receivers)}")
        calls.append((node.lineno, node.col_offset, name))
    if not calls:
        fail(where, "ResourceRequest.from_request_spec makes no _translate_* call")
    defined = {st.name for st in cls.body if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef))}
    names = [name for _, _, name in sorted(calls)]
    for name in names:
        if name not in defined:
            fail(where, f"ResourceRequest has no method {name}")
    if len(set(names)) != len(names):
        fail(where, "from_request_spec calls a _translate_* method twice")
    return names


def discover_hosts(tree):
    """The scheduler's periodic host discovery: whether only the leader (the first of
    the up nova-scheduler hosts, sorted) runs it, and the warning a HostMappingExists
    gives (its %s is the exception)."""
    mod = "nova.scheduler.manager"
    where = tree.where(mod)
    func = method(tree, mod, top_level_class(tree, mod, "SchedulerManager"),
                  "_discover_hosts_in_cells")
    leader = any(isinstance(node, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == "leader" for t in node.targets)
                 for node in ast.walk(func))
    warnings = [node.value for node in ast.walk(func)
                if isinstance(node, ast.Constant) and isinstance(node.value, str)
                and node.value.startswith("This periodic task")]
    if len(warnings) != 1:
        fail(where, f"_discover_hosts_in_cells: expected one 'This periodic task' warning, found {len(warnings)}")
    return {"leader_only": leader, "host_mapping_exists_warning": warnings[0]}


def tenant_isolation_keys(tree):
    mod = "nova.scheduler.filters.aggregate_multitenancy_isolation"
    where = tree.where(mod)
    cls = top_level_class(tree, mod, "AggregateMultiTenancyIsolation")
    func = method(tree, mod, cls, "host_passes")

    def is_key(node):
        return isinstance(node, ast.Constant) and node.value == TENANT_KEY

    prefix = exact = False
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "startswith" and any(is_key(a) for a in node.args):
                prefix = True
            elif node.func.attr == "get" and node.args and is_key(node.args[0]):
                exact = True
        if isinstance(node, ast.Subscript) and is_key(node.slice):
            exact = True
        if isinstance(node, ast.keyword) and node.arg == "key" and is_key(node.value):
            exact = True
    if prefix and exact:
        fail(where, f"host_passes both reads the key {TENANT_KEY} and matches it as a prefix")
    if prefix:
        return "prefix"
    if exact:
        return "exact"
    fail(where, f"host_passes neither calls startswith('{TENANT_KEY}') nor reads that key")


def image_version_predicate(tree):
    mod = "nova.scheduler.filters.image_props_filter"
    where = tree.where(mod)
    cls = top_level_class(tree, mod, "ImagePropertiesFilter")
    kinds = set()
    for node in ast.walk(cls):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if not ((isinstance(f, ast.Attribute) and f.attr == "VersionPredicate")
                or (isinstance(f, ast.Name) and f.id == "VersionPredicate")):
            continue
        ent = tree.resolve(mod, f)
        if ent.kind == "external" and ent.name == "distutils.versionpredicate.VersionPredicate":
            kinds.add("distutils")
        elif ent.kind == "external" and ent.name == "oslo_utils.versionutils.VersionPredicate":
            kinds.add("versionutils")
        else:
            fail(where, f"line {node.lineno}: VersionPredicate from an unknown place: "
                        f"{ent.kind} {ent.name}")
    if len(kinds) != 1:
        fail(where, f"ImagePropertiesFilter uses VersionPredicate of {sorted(kinds) or 'nothing'}")
    return kinds.pop()


def options(tree):
    mod = "nova.conf.scheduler"
    where = tree.where(mod)
    register = top_level_function(tree, mod, "register_opts")
    if len(register.args.args) != 1:
        fail(where, "register_opts does not take one argument")
    conf = register.args.args[0].arg

    def group_name(expr):
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return expr.value
        if not isinstance(expr, ast.Name):
            fail(where, f"group '{ast.unparse(expr)}' is neither a name nor a string")
        value = single_assignment(tree, mod, expr.id)
        if not (isinstance(value, ast.Call) and tree.resolve(mod, value.func).name
                == "oslo_config.cfg.OptGroup"):
            fail(where, f"{expr.id} is not a cfg.OptGroup(...)")
        kw = {k.arg: k.value for k in value.keywords}
        name = value.args[0] if value.args else kw.get("name")
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            fail(where, f"{expr.id}: OptGroup name is not a string literal")
        return name.value

    registered = []  # (group, list name)
    for st in register.body:
        ok = (isinstance(st, ast.Expr) and isinstance(st.value, ast.Call)
              and isinstance(st.value.func, ast.Attribute)
              and isinstance(st.value.func.value, ast.Name) and st.value.func.value.id == conf)
        if not ok:
            fail(where, f"line {st.lineno}: register_opts does '{ast.unparse(st)}'")
        call = st.value
        kw = {k.arg: k.value for k in call.keywords}
        if call.func.attr == "register_group":
            continue
        if call.func.attr != "register_opts" or len(call.args) != 1 or not isinstance(call.args[0], ast.Name):
            fail(where, f"line {st.lineno}: register_opts does '{ast.unparse(st)}'")
        if set(kw) - {"group"}:
            fail(where, f"line {st.lineno}: unexpected arguments in '{ast.unparse(st)}'")
        group = group_name(kw["group"]) if "group" in kw else "DEFAULT"
        registered.append((group, call.args[0].id))

    out = {}
    for group, list_name in registered:
        if group not in OPTION_GROUPS:
            continue
        value = single_assignment(tree, mod, list_name)
        never_mutated(tree, mod, list_name)
        if not isinstance(value, ast.List):
            fail(where, f"{list_name} is not a list literal")
        opts = out.setdefault(group, {})
        for elt in value.elts:
            name, opt = one_option(tree, mod, elt)
            if name in opts:
                fail(where, f"[{group}] {name} is defined twice")
            opts[name] = opt
    for group in OPTION_GROUPS:
        if not out.get(group):
            fail(where, f"no option is registered in group [{group}]")
    return out


def one_option(tree, mod, call):
    where = tree.where(mod)
    line = getattr(call, "lineno", "?")
    if not isinstance(call, ast.Call):
        fail(where, f"line {line}: option '{ast.unparse(call)}' is not a cfg.*Opt(...) call")
    ent = tree.resolve(mod, call.func)
    prefix = "oslo_config.cfg."
    if ent.kind != "external" or not ent.name.startswith(prefix) or not ent.name.endswith("Opt"):
        fail(where, f"line {line}: '{ast.unparse(call.func)}' is not an oslo_config.cfg option class")
    if any(k.arg is None for k in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args):
        fail(where, f"line {line}: option built with * or ** arguments")
    kw = {k.arg: k.value for k in call.keywords}
    if len(call.args) > 1 or (call.args and "name" in kw):
        fail(where, f"line {line}: option has positional arguments beyond its name")
    name = call.args[0] if call.args else kw.get("name")
    if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
        fail(where, f"line {line}: option name is not a string literal")
    opt = {"type": ent.name[len(prefix):]}
    if "default" in kw:
        try:
            opt["default"] = jsonable(ast.literal_eval(kw["default"]), f"{where} line {line}")
        except ValueError:
            opt["default"] = {"expr": ast.unparse(kw["default"])}
    else:
        opt["default"] = None  # oslo.config's default
    dfr = kw.get("deprecated_for_removal")
    if dfr is None:
        opt["deprecated_for_removal"] = False
    elif isinstance(dfr, ast.Constant) and isinstance(dfr.value, bool):
        opt["deprecated_for_removal"] = dfr.value
    else:
        fail(where, f"line {line}: deprecated_for_removal is not a bool literal")
    if "choices" in kw:
        try:
            opt["choices"] = jsonable(ast.literal_eval(kw["choices"]), f"{where} line {line}")
        except ValueError:
            pass  # not a literal (e.g. a constant of another module): left out
    return name.value, opt


def class_version(tree, module, name):
    cls = top_level_class(tree, module, name)
    values = [st.value for st in cls.body if isinstance(st, ast.Assign)
              and any(isinstance(t, ast.Name) and t.id == "VERSION" for t in st.targets)]
    if len(values) != 1 or not (isinstance(values[0], ast.Constant) and isinstance(values[0].value, str)):
        fail(tree.where(module), f"class {name}: expected one VERSION = '<string>'")
    return values[0].value


def versions_in_package(tree, package, names):
    pkg_dir = os.path.dirname(tree.module_path(package))
    where_defined = {n: [] for n in names}
    for fname in sorted(os.listdir(pkg_dir)):
        root, ext = os.path.splitext(fname)
        if ext != ".py" or root == "__init__":
            continue
        mod = f"{package}.{root}"
        for st in tree.tree(mod).body:
            if isinstance(st, ast.ClassDef) and st.name in where_defined:
                where_defined[st.name].append(mod)
    out = {}
    for name, mods in where_defined.items():
        if len(mods) != 1:
            fail(tree.rel(pkg_dir), f"expected class {name} in exactly one module, found {mods}")
        out[name] = class_version(tree, mods[0], name)
    return out


def facts(root, series, version):
    tree = Tree(root)
    base_loader = check_loader_rule(tree)
    host_filter = loadable_base(tree, "nova.scheduler.filters", "all_filters",
                                "BaseHostFilter", base_loader)
    host_weigher = loadable_base(tree, "nova.scheduler.weights", "all_weighers",
                                 "BaseHostWeigher", base_loader)
    req_filters, mins = request_filters(tree)
    objects = versions_in_package(tree, "nova.objects", OBJECTS)
    objects.update(versions_in_package(tree, "nova.notifications.objects", PAYLOADS))
    return {
        "generated_by": GENERATED_BY,
        "series": series,
        "nova": version,
        "service_version": service_version(tree),
        "filters": loadable_classes(tree, "nova.scheduler.filters", host_filter),
        "weighers": loadable_classes(tree, "nova.scheduler.weights", host_weigher),
        "request_filters": req_filters,
        "request_filter_min_compute_versions": mins,
        "resource_request_translations": resource_request_translations(tree),
        "tenant_isolation_keys": tenant_isolation_keys(tree),
        "discover_hosts": discover_hosts(tree),
        "image_version_predicate": image_version_predicate(tree),
        "options": options(tree),
        "objects": objects,
    }


def main(argv):
    if len(argv) != 5:
        sys.exit(f"usage: {argv[0]} SOURCE_ROOT SERIES NOVA_VERSION OUT_JSON")
    root, series, version, out = argv[1:]
    if not os.path.isfile(os.path.join(root, "nova", "__init__.py")):
        sys.exit(f"{root}: no nova/ package there")
    try:
        data = facts(root, series, version)
    except ShapeError as e:
        sys.exit(f"nova {version} ({series}): {e}")
    text = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"
    tmp = out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, out)


if __name__ == "__main__":
    main(sys.argv)
