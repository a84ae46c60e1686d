"""GPU: real models built by libraries (transformers' GPT-2, timm's ViT), every torch.nn.LayerNorm
swapped for reimpl.nn.LayerNorm with the same state: logits and every parameter gradient are
torch's bits, in fp32, in bf16, and in fp32 under bf16 autocast. Deterministic algorithms on,
dropout off, attention in its eager (math) form; both models run the same ops apart from
LayerNorm, so any difference is ours."""
import copy

import pytest
import torch

import reimpl
from reimpl.checks.parity import bit_mismatches

pytestmark = pytest.mark.gpu


def swap_layer_norms(model: torch.nn.Module) -> int:
    """Replace every module whose type is exactly torch.nn.LayerNorm by ours, with its state."""
    n = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is torch.nn.LayerNorm:
                ours = reimpl.nn.LayerNorm(child.normalized_shape, eps=child.eps,
                                           elementwise_affine=child.elementwise_affine, bias=child.bias is not None,
                                           device=child.weight.device if child.weight is not None else None,
                                           dtype=child.weight.dtype if child.weight is not None else None)
                ours.load_state_dict(child.state_dict())
                setattr(parent, name, ours)
                n += 1
    return n


def _gpt2():
    transformers = pytest.importorskip("transformers", reason="transformers is not installed here")
    cfg = transformers.GPT2Config(n_layer=2, n_embd=256, n_head=4, vocab_size=512, n_positions=128,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0,
                                  eos_token_id=0)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg).cuda()
    g = torch.Generator(device="cuda").manual_seed(1)
    ids = torch.randint(0, 512, (4, 96), device="cuda", generator=g)
    return model, (lambda m: m(input_ids=ids).logits)


def _vit():
    timm = pytest.importorskip("timm", reason="timm is not installed here")
    torch.manual_seed(0)
    # timm's own LayerNorm subclass by default; torch.nn.LayerNorm on request, which is what is swapped
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=10, drop_rate=0.0,
                              img_size=64, norm_layer=torch.nn.LayerNorm).cuda()
    g = torch.Generator(device="cuda").manual_seed(2)
    images = torch.randn(4, 3, 64, 64, device="cuda", generator=g)
    return model, (lambda m: m(images.to(next(m.parameters()).dtype)))


def _step(model, forward, autocast):
    model.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
        logits = forward(model)
    logits.float().square().mean().backward()
    return logits, {n: p.grad for n, p in model.named_parameters()}


@pytest.fixture
def deterministic():
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    yield
    torch.use_deterministic_algorithms(before)


@pytest.mark.parametrize("mode", ["fp32", "bf16", "autocast_bf16"])
@pytest.mark.parametrize("build", [_gpt2, _vit], ids=["gpt2", "vit"])
def test_logits_and_every_gradient_are_torchs(build, mode, deterministic):
    theirs, forward = build()
    theirs.train()
    if mode == "bf16":
        theirs = theirs.to(torch.bfloat16)
    ours, control = copy.deepcopy(theirs), copy.deepcopy(theirs)
    swapped = swap_layer_norms(ours)
    assert swapped >= 3 and not any(type(m) is torch.nn.LayerNorm for m in ours.modules())
    autocast = mode == "autocast_bf16"
    y_theirs, g_theirs = _step(theirs, forward, autocast)
    y_ours, g_ours = _step(ours, forward, autocast)
    y_control, _ = _step(control, forward, autocast)
    assert bit_mismatches(y_control, y_theirs) == 0, "torch's own model is not deterministic here"
    assert y_ours.dtype == y_theirs.dtype
    assert bit_mismatches(y_ours, y_theirs) == 0, "logits differ"
    assert g_ours.keys() == g_theirs.keys()
    differing = [n for n in g_theirs if (g_ours[n] is None) != (g_theirs[n] is None)
                 or (g_ours[n] is not None and bit_mismatches(g_ours[n], g_theirs[n]) != 0)]
    assert differing == [], differing
