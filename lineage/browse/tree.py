"""TreeUses: a bounded window of the lineage tree, for the tree page.

Owns: :meth:`TreeUses.tree_window` (one indexed query per level plus one count; the
chain to the best and the path to a focused trial always shown), :class:`TreeNode`,
:class:`TreeWindow`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import Connection

from lineage.chain import chain_length, chain_slice, current_best, on_chain
from lineage.domain import Project, Trial, check_window
from lineage.store import Store

#: How many levels above a focused trial the tree window starts.
FOCUS_LEVELS_ABOVE = 3
#: Trials of the chain to the best one page of the flat view shows.
CHAIN_PAGE = 100
#: A window root's ancestors the breadcrumb lists whole; more show their ends.
ANCESTORS_SHOWN = 6


@dataclass(slots=True)
class TreeNode:
    trial: Trial
    children: list[TreeNode] = field(default_factory=list)
    child_count: int = 0
    #: whether ``children`` were read (False at the window's depth or budget limit)
    loaded: bool = False


@dataclass(frozen=True, slots=True)
class TreeWindow:
    project: Project
    best: Trial | None
    chain_ids: frozenset[str]
    focus_ids: frozenset[str]
    focus: str | None
    #: the window's root trial; None for the top of the tree
    root: Trial | None
    #: root-first path to ``root`` (excluded): all of it, or its first two and last three
    #: when it has more than :data:`ANCESTORS_SHOWN` (``ancestors_total`` says how many)
    ancestors: tuple[Trial, ...]
    nodes: list[TreeNode]
    #: children of the window root (or top-level trials) in all
    top_count: int
    offset: int
    per_node: int
    depth: int
    truncated: bool
    #: trials whose parent is not in the project; None when the project is too big to look
    orphans: tuple[Trial, ...] | None
    #: the flat view of a linear loop: ``nodes`` are a page of the chain to the best, each
    #: with its other children folded under it (``child_count`` excludes the chain's next)
    flat: bool = False
    #: trials on the chain to the best (flat view)
    chain_total: int = 0
    ancestors_total: int = 0


def tree_window(
    store: Store,
    project_slug: str,
    *,
    root: str | None = None,
    focus: str | None = None,
    depth: int = 8,
    per_node: int = 25,
    budget: int = 400,
    offset: int = 0,
    orphan_scan_limit: int = 20_000,
    nested: bool = False,
) -> TreeWindow:
    """A window of the lineage tree: from ``root`` (default: the top, trials without a
    parent) ``depth`` levels down, at most ``per_node`` children a node (the window
    root's from ``offset``) and ``budget`` nodes in all. The chain to the best and the
    path to ``focus`` are always included (``focus`` roots the window a few levels
    above it). Queries: one per level plus one count, each indexed.

    A linear loop (the chain to the best longer than ``depth``, no ``root``, not
    ``nested``) gets the flat view instead: a page of :data:`CHAIN_PAGE` chain trials
    as one column (from ``offset``, or the page holding ``focus`` or its parent), each
    with its other children, ``per_node`` at most, folded under it -- a staircase of
    ``depth`` levels would show a few dozen trials of a long loop."""
    for name, value in (("depth", depth), ("per_node", per_node), ("budget", budget)):
        check_window(name, value, minimum=1)
    check_window("offset", offset, minimum=0)
    with store.read() as conn:
        project = store.projects.project(conn, project_slug)
        best = current_best(store, conn, project)
        chain_total = chain_length(store, conn, project, best.exp_id) if best else 0
        if not root and not nested and chain_total > depth:
            flat = _flat(store, conn, project, best, chain_total, focus, offset, per_node, depth)
            if flat is not None:
                return flat
        focus_path: list[Trial] = []
        ancestors: list[Trial] = []
        ancestors_total = 0
        root_depth = 0  # the window root's depth on its chain (0: the top)
        if focus:
            focus = store.trials.trial(conn, project, focus).exp_id  # an id as shown finds its trial
            focus_depth = chain_length(store, conn, project, focus)
            at = max(0, focus_depth - 1 - FOCUS_LEVELS_ABOVE)
            focus_path = chain_slice(store, conn, project, focus, at, focus_depth - at, length=focus_depth)
            root = focus_path[0].exp_id if at > 0 else None
            ancestors, ancestors_total = _ancestors(store, conn, project, focus, at, focus_depth)
            root_depth = at + 1 if root else 0
        elif root:
            root = store.trials.trial(conn, project, root).exp_id
            root_depth = chain_length(store, conn, project, root)
            ancestors, ancestors_total = _ancestors(store, conn, project, root, root_depth - 1, root_depth)
        # the chain to the best where this window can show it: from the window root's level down
        best_chain = (
            chain_slice(store, conn, project, best.exp_id, max(0, root_depth - 1), depth + 2, length=chain_total)
            if best
            else []
        )
        forced: dict[str, str] = {}  # parent -> child that must be shown
        for parent, child in zip(best_chain, best_chain[1:]):
            forced.setdefault(parent.exp_id, child.exp_id)
        for parent, child in zip(focus_path, focus_path[1:]):
            forced[parent.exp_id] = child.exp_id
        root_trial = store.trials.trial(conn, project, root) if root else None
        known: dict[str, Trial] = {t.exp_id: t for t in (*best_chain, *focus_path)}
        root_key = root or ""
        nodes: dict[str, TreeNode] = {}
        top: list[TreeNode] = []
        frontier = [root_key]
        shown = 0
        truncated = False
        for level in range(depth):
            if not frontier:
                break
            # the forced path first, so it never runs out of budget
            frontier.sort(key=lambda i: (i not in forced, nodes[i].trial.seq if i in nodes else -1))
            expand: list[str] = []
            for parent_id in frontier:
                if shown >= budget and parent_id not in forced:
                    truncated = True
                    continue
                expand.append(parent_id)
                shown += per_node
            page = store.pages.children_window(
                conn, project, expand, limit=per_node, offset=offset if level == 0 else 0
            )
            next_frontier: list[str] = []
            for parent_id in expand:
                kids = page[parent_id]
                # a later page of the window root's children shows just that page
                must = forced.get(parent_id) if level or not offset else None
                if must and all(k.exp_id != must for k in kids):
                    kid = known.get(must) or store.trials.find_trial(conn, project, must)
                    if kid is not None:
                        kids = sorted([*kids, kid], key=lambda t: t.seq or 0)
                made = [TreeNode(trial=kid) for kid in kids]
                for node in made:
                    nodes[node.trial.exp_id] = node
                    next_frontier.append(node.trial.exp_id)
                if parent_id == root_key:
                    top = made
                else:
                    nodes[parent_id].children = made
                    nodes[parent_id].loaded = True
            frontier = next_frontier
        counts = store.pages.child_counts(conn, project, [root_key, *nodes])
        for exp_id, node in nodes.items():
            node.child_count = counts.get(exp_id, 0)
        orphans: list[Trial] | None = None
        if not root and offset == 0:
            orphans = (
                store.pages.orphans(conn, project, limit=per_node) if project.trial_count <= orphan_scan_limit else None
            )
        return TreeWindow(
            project=project,
            best=best,
            chain_ids=frozenset(t.exp_id for t in best_chain),
            focus_ids=frozenset(t.exp_id for t in focus_path),
            focus=focus,
            root=root_trial,
            ancestors=tuple(ancestors),
            ancestors_total=ancestors_total,
            nodes=top,
            top_count=counts.get(root_key, 0),
            offset=offset,
            per_node=per_node,
            depth=depth,
            truncated=truncated,
            orphans=tuple(orphans) if orphans is not None else None,
        )


def _ancestors(
    store: Store,
    conn: Connection,
    project: Project,
    exp_id: str,
    count: int,
    length: int,
) -> tuple[list[Trial], int]:
    """The first ``count`` trials of the chain ending at ``exp_id`` (of ``length``) as
    the breadcrumb shows them: all, or the first two and the last three."""
    if count <= 0:
        return [], 0
    if count <= ANCESTORS_SHOWN:
        return chain_slice(store, conn, project, exp_id, 0, count, length=length), count
    return (
        chain_slice(store, conn, project, exp_id, 0, 2, length=length)
        + chain_slice(store, conn, project, exp_id, count - 3, 3, length=length)
    ), count


def _flat(
    store: Store,
    conn: Connection,
    project: Project,
    best: Trial | None,
    length: int,
    focus: str | None,
    offset: int,
    per_node: int,
    depth: int,
) -> TreeWindow | None:
    """The flat view (see :meth:`tree_window`) of a chain to the best of ``length``
    trials: the page read alone; None when ``focus`` is neither on the chain nor a
    child of a chain trial (the nested tree shows it)."""
    assert best is not None
    focus_trial = None
    upto = -1  # the focus' position on the chain, or its parent's
    if focus:
        focus_trial = store.trials.trial(conn, project, focus)
        focus = focus_trial.exp_id
        parent = focus_trial.parent_exp
        if on_chain(store, conn, project, focus, best.exp_id):
            upto = chain_length(store, conn, project, focus) - 1
        elif parent and on_chain(store, conn, project, parent, best.exp_id):
            upto = chain_length(store, conn, project, parent) - 1
        else:
            return None
        offset = upto // CHAIN_PAGE * CHAIN_PAGE
    offset = min(offset, max(0, length - 1)) // CHAIN_PAGE * CHAIN_PAGE
    read = chain_slice(store, conn, project, best.exp_id, offset, CHAIN_PAGE + 1, length=length)
    page = read[:CHAIN_PAGE]
    ids = [t.exp_id for t in page]
    after = {t.exp_id: read[i + 1].exp_id for i, t in enumerate(read[:-1])}
    kids = store.pages.children_window(conn, project, ids, limit=per_node + 1)
    nodes = []
    for trial in page:
        folded = [k for k in kids.get(trial.exp_id, []) if k.exp_id != after.get(trial.exp_id)][:per_node]
        if (
            focus_trial is not None
            and focus_trial.parent_exp == trial.exp_id
            and focus != after.get(trial.exp_id)
            and all(k.exp_id != focus for k in folded)
        ):
            folded.append(focus_trial)
        nodes.append(TreeNode(trial=trial, children=[TreeNode(trial=k) for k in folded], loaded=True))
    counts = store.pages.child_counts(conn, project, [*ids, *(c.trial.exp_id for n in nodes for c in n.children)])
    for node in nodes:
        node.child_count = counts.get(node.trial.exp_id, 0) - (1 if node.trial.exp_id in after else 0)
        for child in node.children:
            child.child_count = counts.get(child.trial.exp_id, 0)
    focus_ids: frozenset[str] = frozenset()
    if focus_trial is not None:  # the path to it is the chain up to it (or to its parent): no second walk
        focus_ids = frozenset([*(t.exp_id for t in page[: upto - offset + 1]), focus_trial.exp_id])
    return TreeWindow(
        project=project,
        best=best,
        chain_ids=frozenset(ids),
        focus_ids=focus_ids,
        focus=focus,
        root=None,
        ancestors=(),
        nodes=nodes,
        top_count=length,
        offset=offset,
        per_node=per_node,
        depth=depth,
        truncated=False,
        orphans=None,
        flat=True,
        chain_total=length,
    )
