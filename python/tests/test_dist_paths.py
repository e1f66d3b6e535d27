"""The distributed paths a GPU run takes, checked where a CPU can check them: which ranks each
process group of a pp x dp x Ulysses layout joins (a pure function, against the layout's rule and
the plans' stage placement), NCCL's message-order check of a plan's stage boundaries, and, on 4
gloo processes, the groups setup() really builds, the plan broadcast, Ulysses' all-to-all with
shares that differ (a rank with no token too), the fp64 sums, and a plan's messages through
NCCL's per-(kind, boundary) groups."""

import os
import socket
import time
import unittest
from fractions import Fraction
from types import SimpleNamespace

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import infinipipe as ip
from common import LENGTHS, MODEL
from infinipipe.torch.distributed import (RankGroups, build_groups, group_specs, place_of,
                                          rank_of, setup)
from infinipipe.torch.link import DistLink, channel_orders, check_channel_orders
from infinipipe.torch.planning import BatchPlanner
from infinipipe.torch.trainer import sum_in_buckets
from infinipipe.torch.ulysses import HeadExchange, UlyssesGroup

ROLES = ("pipeline", "data_parallel", "sequence", "replica_group", "embedding")


def members(pp, dp, sp, num_stages, tied, links=True):
    """rank -> {role or (kind, boundary): the ranks of its group} from group_specs."""
    out = {r: {} for r in range(pp * dp * sp)}
    for spec in group_specs(pp, dp, sp, num_stages, tied, links):
        for r in spec.ranks:
            key = spec.key if spec.role == "link_groups" else spec.role
            if key in out[r]:
                raise AssertionError(f"rank {r} is in two {key} groups")
            out[r][key] = set(spec.ranks)
    return out


class GroupMembership(unittest.TestCase):
    def test_a_pp2_dp2_ulysses2_layout_by_hand(self):
        # Rank = (stage x dp + replica) x u + position: rank 5 is stage 1, replica 0, position 1.
        self.assertEqual(place_of(5, 2, 2), (1, 0, 1))
        m = members(2, 2, 2, 4, tied=True)[5]
        self.assertEqual(m["pipeline"], {1, 5})
        self.assertEqual(m["data_parallel"], {4, 5, 6, 7})
        self.assertEqual(m["sequence"], {4, 5})
        self.assertEqual(m["replica_group"], {0, 1, 4, 5})
        self.assertEqual(m["embedding"], {1, 5})
        # vpp 2: stages 0..3 on pipeline ranks 0, 1, 0, 1; every boundary joins 1 and 5.
        for b in range(3):
            for kind in (0, 1):
                self.assertEqual(m[(kind, b)], {1, 5})
        self.assertNotIn("embedding", members(3, 1, 1, 3, tied=True)[1])  # a middle stage
        self.assertNotIn("embedding", members(2, 1, 1, 2, tied=False)[0])

    def test_every_layout_partitions_the_world_by_the_layout_rule(self):
        for pp in (1, 2, 3, 4):
            for dp in (1, 2, 3):
                for sp in (1, 2, 4):
                    for vpp in (1, 2):
                        with self.subTest(pp=pp, dp=dp, sp=sp, vpp=vpp):
                            self.check_layout(pp, dp, sp, pp * vpp)

    def check_layout(self, pp, dp, sp, num_stages):
        n = pp * dp * sp
        m = members(pp, dp, sp, num_stages, tied=True)
        places = {r: place_of(r, dp, sp) for r in range(n)}
        self.assertEqual(sorted(rank_of(*places[r], dp, sp) for r in range(n)), list(range(n)))
        for r, (stage, replica, k) in places.items():
            g = RankGroups.at(r, n, pp, dp, sp, torch.device("cpu"), "gloo")
            self.assertEqual((g.stage, g.replica, g.sp_rank), (stage, replica, k))
            self.assertEqual(g.copy_index, replica * sp + k)
            want = {
                "pipeline": {q for q, p in places.items() if p[1:] == (replica, k)},
                "data_parallel": {q for q, p in places.items() if p[0] == stage},
                "sequence": {q for q, p in places.items() if p[:2] == (stage, replica)},
                "replica_group": {q for q, p in places.items() if p[1] == replica},
            }
            if pp > 1 and stage in (0, pp - 1):
                want["embedding"] = {q for q, p in places.items()
                                     if p[1:] == (replica, k) and p[0] in (0, pp - 1)}
            for b in range(num_stages - 1):
                ends = {b % pp, (b + 1) % pp}
                if len(ends) == 2 and stage in ends:
                    for kind in (0, 1):
                        want[(kind, b)] = {q for q, p in places.items()
                                           if p[1:] == (replica, k) and p[0] in ends}
            self.assertEqual(m[r], want, f"rank {r}")
            self.assertEqual(len(want["pipeline"]), pp)
            self.assertEqual(len(want["data_parallel"]), dp * sp)
            self.assertEqual(want["sequence"], set(range(r - k, r - k + sp)))  # consecutive
        # Without NCCL no link groups, and the order of creation is one list for every rank.
        plain = group_specs(pp, dp, sp, num_stages, True, False)
        self.assertFalse([s for s in plain if s.role == "link_groups"])
        self.assertEqual(plain, group_specs(pp, dp, sp, num_stages, True, False))

    def test_link_groups_join_the_ranks_the_plans_put_the_stages_on(self):
        for pp, vpp, dp in ((2, 1, 2), (2, 2, 1), (4, 2, 1)):
            with self.subTest(pp=pp, vpp=vpp, dp=dp):
                cfg = ip.Config.from_args(MODEL + [
                    "--pp", str(pp), "--vpp", str(vpp), "--dp", str(dp), "--memory-budget",
                    "8MiB", "--global-batch-size", str(len(LENGTHS))])
                plan = ip.plan(LENGTHS, cfg).plan
                m = members(pp, dp, 1, len(plan.stages), tied=True)
                for b in range(len(plan.stages) - 1):
                    for replica in range(dp):
                        ends = {rank_of(plan.stages[s].rank, replica, 0, dp, 1) for s in (b, b + 1)}
                        for r in ends:
                            self.assertEqual(m[r][(0, b)], ends)
                            self.assertEqual(m[r][(1, b)], ends)


def plain_plan(plan, actions=None):
    """A stand-in with the attributes check_channel_orders reads (Plans are immutable)."""
    return SimpleNamespace(pp=plan.pp, stages=plan.stages,
                           actions=actions if actions is not None else
                           [[SimpleNamespace(kind=a.kind, stage=a.stage, chunk=a.chunk)
                             for a in rank] for rank in plan.actions])


def swapped(plan, kind, stage):
    """The plan's actions with the first two `kind` actions of `stage` on different chunks
    exchanged: their messages over one boundary change order on one end only."""
    acts = plain_plan(plan).actions
    rank = plan.stages[stage].rank
    at = [i for i, a in enumerate(acts[rank]) if a.kind == kind and a.stage == stage]
    for j in at[1:]:
        if acts[rank][j].chunk != acts[rank][at[0]].chunk:
            i = at[0]
            acts[rank][i], acts[rank][j] = acts[rank][j], acts[rank][i]
            return plain_plan(plan, acts)
    raise AssertionError(f"stage {stage} runs one chunk only")


class ChannelOrders(unittest.TestCase):
    def plan(self, schedule, *words):
        cfg = ip.Config.from_args(MODEL + list(words) + [
            "--global-batch-size", str(len(LENGTHS))])
        return cfg, ip.plan(LENGTHS, cfg, schedule=schedule).plan

    def test_every_schedules_plans_keep_one_order_per_boundary(self):
        for schedule in ip.schedules():
            for pp, vpp, budget in ((2, 1, "8MiB"), (4, 1, "5MiB"), (2, 2, "8MiB")):
                if (schedule == "interleaved") != (vpp > 1):
                    continue
                with self.subTest(schedule=schedule, pp=pp, vpp=vpp):
                    cfg, plan = self.plan(schedule, "--pp", str(pp), "--vpp", str(vpp),
                                          "--memory-budget", budget)
                    check_channel_orders(plan)
                    check_channel_orders(plain_plan(plan))
                    check_channel_orders(
                        ip.plan_forward_only(plan, ip.CostModel.from_config(cfg), cfg))
                    # Every chunk crosses every boundary once each way.
                    for b in range(len(plan.stages) - 1):
                        sent = channel_orders(plan, plan.stages[b].rank)[(0, b, "send")]
                        self.assertEqual(sorted(sent), list(range(len(plan.chunks))))

    def test_a_reordered_send_is_refused_naming_its_boundary(self):
        _, plan = self.plan("", "--pp", "4", "--memory-budget", "5MiB")
        # Stage 0 sends activations in a new order; the last stage sends gradients in a new
        # order; stage 2 takes activations (and sends them) in a new order: the first boundary
        # whose two ends disagree is named.
        with self.assertRaisesRegex(RuntimeError, "activations between stages 0 and 1"):
            check_channel_orders(swapped(plan, "forward", 0))
        with self.assertRaisesRegex(RuntimeError, "gradients between stages 2 and 3"):
            check_channel_orders(swapped(plan, "backward", 3))
        with self.assertRaisesRegex(RuntimeError, "activations between stages 1 and 2"):
            check_channel_orders(swapped(plan, "forward", 2))
        with self.assertRaisesRegex(RuntimeError, "gradients between stages 0 and 1"):
            check_channel_orders(swapped(plan, "backward", 0))  # stage 0 takes them


# -- 4 gloo processes ---------------------------------------------------------------------------
# pp 2 x dp 1 x Ulysses 2, tied embeddings, vpp 2: rank = stage x 2 + position.
WORLD, PP, DP, SP, STAGES = 4, 2, 1, 2, 4
BY_HAND = {  # rank -> the members of its groups, as the layout rule says
    0: {"pipeline": {0, 2}, "data_parallel": {0, 1}, "sequence": {0, 1},
        "replica_group": {0, 1, 2, 3}, "embedding": {0, 2}},
    1: {"pipeline": {1, 3}, "data_parallel": {0, 1}, "sequence": {0, 1},
        "replica_group": {0, 1, 2, 3}, "embedding": {1, 3}},
    2: {"pipeline": {0, 2}, "data_parallel": {2, 3}, "sequence": {2, 3},
        "replica_group": {0, 1, 2, 3}, "embedding": {0, 2}},
    3: {"pipeline": {1, 3}, "data_parallel": {2, 3}, "sequence": {2, 3},
        "replica_group": {0, 1, 2, 3}, "embedding": {1, 3}},
}


def seen_by(group, rank):
    """The members of `group`, as a sum over it of one-hot vectors says."""
    v = torch.zeros(WORLD)
    v[rank] = 1
    dist.all_reduce(v, group=group)
    return {r for r in range(WORLD) if v[r] == 1}


def check_groups(rank):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(WORLD), LOCAL_RANK=str(rank))
    g = setup(PP, DP, "cpu", STAGES, True, timeout_s=60, sp=SP)  # torchrun's variables
    for role, want in BY_HAND[rank].items():
        got = seen_by(getattr(g, role), rank)
        if got != want:
            raise AssertionError(f"rank {rank}: {role} group {got}, want {want}")
    if g.link_groups:
        raise AssertionError("gloo needs no link groups")
    # NCCL's link groups, built here on gloo: every boundary joins this rank's pipeline's ends.
    links = RankGroups.at(rank, WORLD, PP, DP, SP, g.device, g.backend)
    build_groups(links, STAGES, True, links=True)
    if sorted(links.link_groups) != [(k, b) for k in (0, 1) for b in range(STAGES - 1)]:
        raise AssertionError(f"rank {rank}: link groups {sorted(links.link_groups)}")
    for key, grp in sorted(links.link_groups.items()):
        if seen_by(grp, rank) != BY_HAND[rank]["pipeline"]:
            raise AssertionError(f"rank {rank}: link group {key}")
    return g, links


def check_links(links: RankGroups):
    """A plan's sends and receives, in each rank's action order, through DistLink over NCCL's
    per-(kind, boundary) groups (here on gloo): every message arrives where and as sent."""
    cfg = ip.Config.from_args(MODEL + ["--pp", str(PP), "--vpp", "2", "--ulysses-degree",
                                       str(SP), "--memory-budget", "5MiB",
                                       "--global-batch-size", str(len(LENGTHS))])
    plan = ip.plan(LENGTHS, cfg, schedule="interleaved").plan  # EPP may keep 2 stages
    if len(plan.stages) != STAGES:
        raise AssertionError(f"{len(plan.stages)} stages")
    link = DistLink(plan, links, torch.float32)
    last = len(plan.stages) - 1

    def value(kind, stage, chunk):  # what stage `stage` sends of chunk `chunk`
        return torch.full((3 + chunk % 4, 2), float((kind * 100 + chunk) * 10 + stage))

    def expect(t, kind, stage, chunk):
        if not torch.equal(t, value(kind, stage, chunk)):
            raise AssertionError(f"rank {links.rank}: kind {kind} chunk {chunk} from stage "
                                 f"{stage}: got {t[0, 0].item()}")

    for a in plan.actions[links.stage]:
        shape = tuple(value(0, 0, a.chunk).shape)
        if a.kind == "forward":
            if a.stage > 0:
                expect(link.recv_activation(a.stage, a.chunk, shape), 0, a.stage - 1, a.chunk)
            if a.stage < last:
                link.send_activation(a.stage, a.chunk, value(0, a.stage, a.chunk))
        else:
            if a.stage < last:
                expect(link.recv_grad(a.stage, a.chunk, shape), 1, a.stage + 1, a.chunk)
            if a.stage > 0:
                link.send_grad(a.stage, a.chunk, value(1, a.stage, a.chunk))
    link.finish()


def check_plan_broadcast(g):
    cfg = ip.Config.from_args(MODEL + ["--pp", str(PP), "--ulysses-degree", str(SP),
                                       "--memory-budget", "4MiB", "--global-batch-size",
                                       str(len(LENGTHS))])
    made = ip.plan(LENGTHS, cfg)  # the same plan on every rank: what rank 0's must arrive as
    planner = BatchPlanner(cfg, ip.CostModel.from_config(cfg), g)
    first = g.rank == 0
    plan, setting = planner.share_plan(made.plan.to_json() if first else None,
                                       made.setting if first else None)
    if plan.to_json() != made.plan.to_json() or setting != made.setting:
        raise AssertionError(f"rank {g.rank}: the broadcast plan differs from rank 0's")


def check_ulysses(g, sp: UlyssesGroup, tokens, heads, dtype):
    """One attention input's exchange: to_heads hands each member every token of its heads,
    to_tokens hands them back, and each one's backward is the other."""
    gen = torch.Generator().manual_seed(tokens * 100 + heads)
    x_all = torch.randn(tokens, heads, 8, generator=gen).to(dtype)
    w_all = torch.randn(tokens, heads, 8, generator=gen).to(dtype)
    ex = HeadExchange(sp, tokens)
    lo, hi = ex.rows
    h = heads // sp.size
    mine = slice(sp.me * h, (sp.me + 1) * h)
    x = x_all[lo:hi].clone().requires_grad_(True)
    y = ex.to_heads(x)
    where = f"rank {g.rank}, {tokens} tokens, {heads} heads over {sp.size}, {dtype}"
    if not torch.equal(y, x_all[:, mine]):
        raise AssertionError(f"to_heads: {where}")
    (y * w_all[:, mine]).sum().backward()
    if not torch.equal(x.grad, w_all[lo:hi]):
        raise AssertionError(f"to_heads' gradient: {where}")
    y2 = y.detach().requires_grad_(True)
    back = ex.to_tokens(y2)
    if not torch.equal(back, x_all[lo:hi]):
        raise AssertionError(f"to_tokens: {where}")
    (back * w_all[lo:hi]).sum().backward()
    if not torch.equal(y2.grad, w_all[:, mine]):
        raise AssertionError(f"to_tokens' gradient: {where}")


def check_sums(g):
    # fp64 terms fp32 would round (2^40 + r / 8): the sum is exact in fp64 and stays fp64.
    big = torch.tensor([2.0 ** 40 + g.rank / 8, -g.rank / 3], dtype=torch.float64)
    small = torch.full((2, 3), float(g.rank + 1))
    loss = torch.tensor(float(g.rank) * 1e-9, dtype=torch.float64)
    # The trainer's sums: fp64 big and loss packed in one bucket, the fp32 tensor in its own.
    sum_in_buckets([big, loss, small], g.data_parallel, bucket_bytes=64)
    ranks = sorted(BY_HAND[g.rank]["data_parallel"])
    want = [sum(Fraction(2 ** 40) + Fraction(r, 8) for r in ranks)]
    if big.dtype != torch.float64 or small.dtype != torch.float32:
        raise AssertionError("sum_in_buckets changed a dtype")
    if Fraction(big[0].item()) != want[0]:
        raise AssertionError(f"rank {g.rank}: fp64 sum {big[0].item()!r}, want {float(want[0])!r}")
    if abs(big[1].item() + sum(ranks) / 3) > 1e-15 or \
            not torch.equal(small, torch.full((2, 3), float(sum(r + 1 for r in ranks)))) or \
            abs(loss.item() - sum(ranks) * 1e-9) > 1e-24:
        raise AssertionError(f"rank {g.rank}: sums {big.tolist()}, {small.tolist()}, {loss}")
    untouched = torch.ones(3, dtype=torch.float64)
    sum_in_buckets([untouched], None)  # no group (one copy): nothing to sum
    if not torch.equal(untouched, torch.ones(3, dtype=torch.float64)):
        raise AssertionError("sum_in_buckets without a group changed its tensor")


def worker(rank, port):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    for k in ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"):
        os.environ.pop(k, None)
    g, links = check_groups(rank)
    check_links(links)
    check_plan_broadcast(g)
    sp = UlyssesGroup([g.rank_of(g.stage, g.replica, k) for k in range(SP)], g.sp_rank,
                      g.sequence)
    trio = dist.new_group([0, 1, 2])  # every rank creates it; ranks 0..2 use it
    for tokens, heads, dtype in ((7, 4, torch.float32), (8, 2, torch.float32),
                                 (1, 4, torch.float32), (5, 4, torch.bfloat16)):
        check_ulysses(g, sp, tokens, heads, dtype)
    if rank < 3:
        for tokens, heads in ((8, 6, ), (2, 3), (3, 3)):  # shares 3/3/2, 1/1/0, 1/1/1
            check_ulysses(g, UlyssesGroup([0, 1, 2], rank, trio), tokens, heads, torch.float32)
    check_sums(g)
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class GlooPaths(unittest.TestCase):
    def test_groups_plan_broadcast_ulysses_and_sums_on_four_processes(self):
        ctx = mp.spawn(worker, args=(free_port(),), nprocs=WORLD, join=False)
        deadline = time.monotonic() + 120
        try:
            while not ctx.join(timeout=2):  # a worker's exception is raised here
                if time.monotonic() > deadline:
                    self.fail("the gloo processes did not finish in 120 s")
        finally:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()


if __name__ == "__main__":
    unittest.main()
