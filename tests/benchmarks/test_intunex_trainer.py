"""The trainer's DLRM-style model: one logit per row, and a step on a batch moves its loss down."""

from __future__ import annotations


def test_dlrm_model_trains_on_a_batch() -> None:
    import torch

    from benchmarks.intunex_trainer import LEARNING_RATE, dlrm_model

    torch.manual_seed(0)
    sizes = (10, 100, 1000)
    model = dlrm_model(sizes)
    x = torch.rand(64, 13)
    cat = torch.stack([torch.randint(0, n, (64,)) for n in sizes], dim=1)
    y = (x[:, 0] > 0.5).float()
    sgd = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    assert model(x, cat).shape == (64,)
    first = loss_fn(model(x, cat), y)
    for _ in range(20):
        loss = loss_fn(model(x, cat), y)
        sgd.zero_grad()
        loss.backward()
        sgd.step()
    assert float(loss_fn(model(x, cat), y)) < float(first)
