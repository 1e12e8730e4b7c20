import pytest
import torch

from torch_geometric_gate.nn.inits import looks_linear_orthogonal_


def _assert_orthonormal(d):
    # Orthonormal rows or columns, whichever are fewer:
    gram = d @ d.t() if d.size(0) <= d.size(1) else d.t() @ d
    assert torch.allclose(gram, torch.eye(gram.size(0)), atol=1e-5)


@pytest.mark.parametrize('shape', [(8, 3), (8, 12), (6, 6)])
def test_first(shape):
    w = looks_linear_orthogonal_(torch.empty(*shape), 'first')
    half = shape[0] // 2
    assert torch.equal(w[half:], -w[:half])
    _assert_orthonormal(w[:half])


@pytest.mark.parametrize('shape', [(3, 8), (12, 8), (6, 6)])
def test_last(shape):
    w = looks_linear_orthogonal_(torch.empty(*shape), 'last')
    half = shape[1] // 2
    assert torch.equal(w[:, half:], -w[:, :half])
    _assert_orthonormal(w[:, :half])


@pytest.mark.parametrize('shape', [(8, 8), (4, 10), (10, 4)])
def test_hidden(shape):
    w = looks_linear_orthogonal_(torch.empty(*shape), 'hidden')
    r, c = shape[0] // 2, shape[1] // 2
    d = w[:r, :c]
    assert torch.equal(w[:r, c:], -d)
    assert torch.equal(w[r:, :c], -d)
    assert torch.equal(w[r:, c:], d)
    _assert_orthonormal(d)


@pytest.mark.parametrize('shape', [(3, 7), (7, 3), (5, 5)])
def test_only(shape):
    w = looks_linear_orthogonal_(torch.empty(*shape), 'only')
    _assert_orthonormal(w)


def test_relu_pairs_recover_linear_map():
    # first -> ReLU -> hidden -> ReLU -> last is the product of the blocks.
    torch.manual_seed(0)
    w1 = looks_linear_orthogonal_(torch.empty(10, 3), 'first')
    w2 = looks_linear_orthogonal_(torch.empty(10, 10), 'hidden')
    w3 = looks_linear_orthogonal_(torch.empty(4, 10), 'last')
    x = torch.randn(20, 3)
    out = torch.relu(torch.relu(x @ w1.t()) @ w2.t()) @ w3.t()
    expected = x @ w1[:5].t() @ w2[:5, :5].t() @ w3[:, :5].t()
    assert torch.allclose(out, expected, atol=1e-5)


def test_seeded_and_in_place():
    w = torch.empty(4, 4)
    torch.manual_seed(1)
    out = looks_linear_orthogonal_(w, 'hidden')
    assert out is w
    torch.manual_seed(1)
    assert torch.equal(
        looks_linear_orthogonal_(torch.empty(4, 4), 'hidden'), w
    )


@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16])
def test_half_precision_is_the_float32_draw_rounded(dtype):
    # QR has no half-precision kernel: the blocks are drawn in float32.
    torch.manual_seed(2)
    w = looks_linear_orthogonal_(torch.empty(4, 6, dtype=dtype), 'hidden')
    torch.manual_seed(2)
    full = looks_linear_orthogonal_(torch.empty(4, 6), 'hidden')
    assert w.dtype == dtype and torch.equal(w, full.to(dtype))


def test_parameter_keeps_requires_grad():
    w = torch.nn.Parameter(torch.empty(4, 6))
    looks_linear_orthogonal_(w, 'first')
    assert w.requires_grad and w.grad is None


@pytest.mark.parametrize(
    'position,shape,match',
    [
        ('first', (5, 4), 'even number of output channels'),
        ('hidden', (4, 5), 'even number of input channels'),
        ('hidden', (5, 4), 'even number of output channels'),
        ('last', (4, 5), 'even number of input channels'),
    ],
)
def test_odd_sizes(position, shape, match):
    with pytest.raises(ValueError, match=match):
        looks_linear_orthogonal_(torch.empty(*shape), position)


def test_bad_input():
    with pytest.raises(ValueError, match="'position' must be one of"):
        looks_linear_orthogonal_(torch.empty(4, 4), 'middle')
    with pytest.raises(ValueError, match='two-dimensional'):
        looks_linear_orthogonal_(torch.empty(4), 'first')
    with pytest.raises(TypeError, match='torch.Tensor'):
        looks_linear_orthogonal_([[1.0]], 'only')
