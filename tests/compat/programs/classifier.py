"""Image classifier: a small CNN trained with SGD + momentum, StepLR and a held-out accuracy."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self, classes: int = 4) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.dropout = nn.Dropout(0.25)
        self.fc = nn.Linear(16, classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = torch.flatten(self.features(x), 1)
        return self.fc(self.dropout(x))


def main() -> float:
    torch.manual_seed(0)
    images = torch.randn(64, 1, 8, 8)
    labels = torch.randint(0, 4, size=(64,))
    loader = DataLoader(TensorDataset(images, labels), batch_size=16, shuffle=True)
    model = Net()
    optimizer = optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    for _epoch in range(2):
        model.train()
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        scheduler.step()
    model.eval()
    with torch.no_grad():
        logits = model(images)
        correct = logits.argmax(dim=1).eq(labels).sum().item()
        probs = F.softmax(logits, dim=1)
    print(f"accuracy {correct / len(labels):.3f}, loss {loss.item():.4f}, p {probs.max():.3f}")
    return loss.item()


if __name__ == "__main__":
    main()
