"""TreeUses: a bounded window of the lineage tree, for the tree page.

Owns: :meth:`TreeUses.tree_window` (one indexed query per level plus one count; the
chain to the best and the path to a focused trial always shown), :class:`TreeNode`,
:class:`TreeWindow`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lineage.chain import chain_to, current_best
from lineage.domain import Project, Trial, check_window
from lineage.store import Store

#: How many levels above a focused trial the tree window starts.
FOCUS_LEVELS_ABOVE = 3


@dataclass(slots=True)
class TreeNode:
    trial: Trial
    children: list["TreeNode"] = field(default_factory=list)
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
    #: root-first path to ``root`` (excluded)
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



class TreeUses:
    """tree_window."""

    store: Store

    def tree_window(
        self,
        project_slug: str,
        *,
        root: str | None = None,
        focus: str | None = None,
        depth: int = 8,
        per_node: int = 25,
        budget: int = 400,
        offset: int = 0,
        orphan_scan_limit: int = 20_000,
    ) -> "TreeWindow":
        """A window of the lineage tree: from ``root`` (default: the top, trials without a
        parent) ``depth`` levels down, at most ``per_node`` children a node (the window
        root's from ``offset``) and ``budget`` nodes in all. The chain to the best and the
        path to ``focus`` are always included (``focus`` roots the window a few levels
        above it). Queries: one per level plus one count, each indexed."""
        for name, value in (("depth", depth), ("per_node", per_node), ("budget", budget)):
            check_window(name, value, minimum=1)
        check_window("offset", offset, minimum=0)
        with self.store.read() as conn:
            project = self.store.project(conn, project_slug)
            best = current_best(self.store, conn, project)
            best_chain = chain_to(self.store, conn, project, best.exp_id) if best else []
            forced: dict[str, str] = {}  # parent -> child that must be shown
            for chain in (best_chain,):
                for parent, child in zip(chain, chain[1:]):
                    forced.setdefault(parent.exp_id, child.exp_id)
            focus_path: list[Trial] = []
            ancestors: list[Trial] = []
            if focus:
                focus = self.store.trial(conn, project, focus).exp_id  # an id as shown finds its trial
                focus_path = chain_to(self.store, conn, project, focus)
                at = max(0, len(focus_path) - 1 - FOCUS_LEVELS_ABOVE)
                root = focus_path[at].exp_id if at > 0 else None
                ancestors = focus_path[:at] if at > 0 else []
                for parent, child in zip(focus_path, focus_path[1:]):
                    forced[parent.exp_id] = child.exp_id
            elif root:
                root = self.store.trial(conn, project, root).exp_id
                ancestors = chain_to(self.store, conn, project, root)[:-1]
            root_trial = self.store.trial(conn, project, root) if root else None
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
                page = self.store.children_window(
                    conn, project, expand, limit=per_node, offset=offset if level == 0 else 0
                )
                next_frontier: list[str] = []
                for parent_id in expand:
                    kids = page[parent_id]
                    # a later page of the window root's children shows just that page
                    must = forced.get(parent_id) if level or not offset else None
                    if must and all(k.exp_id != must for k in kids):
                        kid = known.get(must) or self.store.find_trial(conn, project, must)
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
            counts = self.store.child_counts(conn, project, [root_key, *nodes])
            for exp_id, node in nodes.items():
                node.child_count = counts.get(exp_id, 0)
            orphans: list[Trial] | None = None
            if not root and offset == 0:
                orphans = (
                    self.store.orphans(conn, project, limit=per_node)
                    if project.trial_count <= orphan_scan_limit else None
                )
            return TreeWindow(
                project=project,
                best=best,
                chain_ids=frozenset(t.exp_id for t in best_chain),
                focus_ids=frozenset(t.exp_id for t in focus_path),
                focus=focus,
                root=root_trial,
                ancestors=tuple(ancestors),
                nodes=top,
                top_count=counts.get(root_key, 0),
                offset=offset,
                per_node=per_node,
                depth=depth,
                truncated=truncated,
                orphans=tuple(orphans) if orphans is not None else None,
            )

