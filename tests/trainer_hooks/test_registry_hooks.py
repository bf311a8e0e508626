"""The one registry: built-in names, unknown names, dotted paths to user callables."""

from __future__ import annotations

import pytest
import torch

from trainer_hooks import registry

try:  # tests/trainer_hooks may or may not be a package
    from . import loop_reference as ref
except ImportError:  # pragma: no cover - depends on the rootdir layout
    import loop_reference as ref


def test_builtin_names_are_registered():
    assert {"ppo", "vanilla", "a2tgpo", "gspo", "gspo_token"} <= set(registry.POLICY_LOSSES.names())
    assert {"a2tgpo", "a2tgpo_turn_group"} <= set(registry.ADVANTAGE_ESTIMATORS.names())
    for module in ("trainer_hooks.advantages.a2tgpo", "trainer_hooks.losses.ppo", "trainer_hooks.losses.gspo"):
        assert module in registry._BUILTIN_MODULES


def test_unknown_name_fails_with_the_known_ones():
    with pytest.raises(KeyError) as err:
        registry.get_policy_loss("ppo2")
    message = str(err.value)
    for name in ("ppo", "vanilla", "a2tgpo", "gspo", "gspo_token"):
        assert repr(name)[1:-1] in message
    assert "'ppo2'" in message
    with pytest.raises(KeyError, match="a2tgpo_turn_group"):
        registry.get_advantage_estimator("a2tgpo_v2")


@pytest.mark.parametrize("sep", [":", "."])
def test_dotted_path_to_a_user_function(sep):
    fn = registry.get_policy_loss(f"{ref.__name__}{sep}custom_policy_loss")
    assert fn is ref.custom_policy_loss
    lp = torch.tensor([[-1.0, -2.0]], dtype=torch.float64, requires_grad=True)
    loss, tel = fn(lp.detach(), lp, torch.ones_like(lp), torch.ones(1, 2, dtype=torch.bool))
    assert loss.item() == pytest.approx(1.5) and tel == {}
    with pytest.raises(KeyError, match="cannot import"):
        registry.get_policy_loss(f"{ref.__name__}:no_such_function")
