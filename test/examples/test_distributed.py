import json
import os
import os.path as osp
import subprocess
import sys

import pytest
import torch
from torch_geometric.testing import withPackage

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
SCRIPT = osp.join(ROOT, 'examples', 'distributed.py')
sys.path.insert(0, osp.join(ROOT, 'examples'))
import distributed  # noqa: E402

# A small graph; full neighbourhoods so that the sampled subgraphs (and
# with them the two runs) are deterministic.
COMMON = ['--num-nodes', '400', '--avg-degree', '6', '--num-features', '8',
          '--num-classes', '3', '--num-layers', '2', '--hidden-channels',
          '16', '--batch-size', '40', '--num-neighbors', '-1', '--epochs',
          '3', '--lr', '0.01']  # fmt: skip


def _run(cmd, out_dir):
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1')
    env.pop('RANK', None)
    env.pop('WORLD_SIZE', None)
    proc = subprocess.run(
        [*cmd, SCRIPT, *COMMON, '--out-dir', out_dir],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    with open(osp.join(out_dir, 'result.json')) as f:
        return proc.stdout, json.load(f)


def _rank(out_dir, rank):
    state = torch.load(osp.join(out_dir, f'rank{rank}.pt'))
    with open(osp.join(out_dir, f'rank{rank}.json')) as f:
        return state, json.load(f)


@withPackage('torch_sparse')
def test_two_processes_match_one_process(tmp_path):
    two, one = str(tmp_path / 'two'), str(tmp_path / 'one')
    torchrun = [sys.executable, '-m', 'torch.distributed.run', '--standalone',
                '--nproc-per-node', '2']  # fmt: skip
    stdout, res2 = _run(torchrun, two)
    assert '2 process(es) (gloo, cpu)' in stdout
    _, res1 = _run([sys.executable], one)
    assert (res2['world_size'], res1['world_size']) == (2, 1)

    # 200 training nodes, global batch 40: 5 steps per epoch either way.
    assert res2['steps_per_epoch'] == res1['steps_per_epoch'] == 5
    state0, info0 = _rank(two, 0)
    state1, info1 = _rank(two, 1)
    state, info = _rank(one, 0)

    # Disjoint shards whose union is the single process's global batch.
    seeds0, seeds1 = (
        set(info0['first_batch_seeds']),
        set(info1['first_batch_seeds']),
    )
    assert len(seeds0) == len(seeds1) == 20 and not seeds0 & seeds1
    assert seeds0 | seeds1 == set(info['first_batch_seeds'])

    # Both ranks end with bit-identical parameters ...
    assert state0.keys() == state1.keys() == state.keys()
    for key in state0:
        assert torch.equal(state0[key], state1[key]), key
    # ... that moved away from the (shared) initialisation ...
    torch.manual_seed(0)
    init = distributed.build_model('GATE', 8, 16, 2, 3).state_dict()
    assert any(not torch.allclose(init[k], state0[k]) for k in init)
    # ... and match one process on the same global batches.
    for key in state0:
        assert torch.allclose(state0[key], state[key], atol=1e-5), key
    assert len(res2['losses']) == len(res1['losses']) == 15
    assert res2['losses'] == pytest.approx(res1['losses'], rel=1e-4)

    # The loss falls (mean of the last epoch below that of the first).
    losses = res2['losses']
    assert sum(losses[-5:]) < 0.8 * sum(losses[:5])


def test_synthetic_graph_is_seeded():
    a = distributed.synthetic_graph(300, 6, 8, 3, seed=1)
    b = distributed.synthetic_graph(300, 6, 8, 3, seed=1)
    c = distributed.synthetic_graph(300, 6, 8, 3, seed=2)
    assert torch.equal(a.edge_index, b.edge_index) and torch.equal(a.x, b.x)
    assert not torch.equal(a.y, c.y)
    assert a.is_undirected() and not a.has_self_loops()
    masks = a.train_mask.int() + a.val_mask.int() + a.test_mask.int()
    assert bool((masks == 1).all()) and int(a.train_mask.sum()) == 150
    # Mostly edges within a class (homophily 0.8 plus chance):
    row, col = a.edge_index
    assert float((a.y[row] == a.y[col]).float().mean()) > 0.7
    with pytest.raises(ValueError, match="'num_features' .* at least"):
        distributed.synthetic_graph(10, 2, 2, 3)


def test_arguments_are_checked():
    with pytest.raises(SystemExit):
        distributed.parse_args(
            ['--num-layers', '3', '--num-neighbors', '1', '2']
        )
    args = distributed.parse_args(
        ['--num-layers', '3', '--num-neighbors', '4']
    )
    assert args.num_neighbors == [4, 4, 4]
