# wandb's quickstart, with the summary and config examples of wandb's guides, exactly as the
# docs write them except for the import line. tests/trainer_hooks/wandb/test_wandb.py runs it
# against a real `lineage serve`.
import random

import trainer_hooks.wandb as wandb

# Start a new wandb run to track this script.
run = wandb.init(
    # Set the wandb entity where your project will be logged (generally your team name).
    entity="my-awesome-team-name",
    # Set the wandb project where this run will be logged.
    project="my-awesome-project",
    name="cnn-cifar100",
    notes="a CNN on CIFAR-100 with learning rate 0.02",
    tags=["baseline", "cnn"],
    # Track hyperparameters and run metadata.
    config={
        "learning_rate": 0.02,
        "architecture": "CNN",
        "dataset": "CIFAR-100",
        "epochs": 10,
    },
)
wandb.config.update({"batch_size": 128})

# Simulate training.
epochs = 10
offset = random.random() / 5
best_accuracy = 0
for epoch in range(2, epochs):
    acc = 1 - 2**-epoch - random.random() / epoch - offset
    loss = 2**-epoch + random.random() / epoch + offset

    # Log metrics to wandb.
    run.log({"acc": acc, "loss": loss})
    if acc > best_accuracy:
        run.summary["best_accuracy"] = acc
        best_accuracy = acc

# Finish the run and upload any remaining data.
run.finish()
