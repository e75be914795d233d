"""Sentiment-style text classification: padded token batches, a bidirectional LSTM whose last
states are concatenated, BCE-with-logits, AdamW; and an EmbeddingBag baseline with offsets."""

import torch
import torch.nn as nn

VOCAB, PAD = 50, 0


class LSTMClassifier(nn.Module):
    def __init__(self, embed=16, hidden=12):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, embed, padding_idx=PAD)
        self.lstm = nn.LSTM(embed, hidden, num_layers=1, batch_first=True, bidirectional=True)
        self.dropout = nn.Dropout(0.2)
        self.fc = nn.Linear(2 * hidden, 1)

    def forward(self, tokens):
        _, (h_n, _) = self.lstm(self.embedding(tokens))
        h = torch.cat((h_n[-2], h_n[-1]), dim=1)
        return self.fc(self.dropout(h)).squeeze(1)


class BagClassifier(nn.Module):
    def __init__(self, embed=16):
        super().__init__()
        self.bag = nn.EmbeddingBag(VOCAB, embed, mode="mean")
        self.fc = nn.Linear(embed, 1)

    def forward(self, flat_tokens, offsets):
        return self.fc(self.bag(flat_tokens, offsets)).squeeze(1)


def train(model, inputs, labels, steps=4):
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.01)
    criterion = nn.BCEWithLogitsLoss()
    for _step in range(steps):
        optimizer.zero_grad()
        loss = criterion(model(*inputs), labels)
        loss.backward()
        optimizer.step()
    return loss


def main() -> float:
    torch.manual_seed(6)
    tokens = torch.randint(1, VOCAB, (8, 7))
    tokens[:, 5:] = PAD
    labels = (tokens[:, 0] > VOCAB // 2).float()
    loss = train(LSTMClassifier(), (tokens,), labels)
    flat = tokens[:, :5].reshape(-1)
    offsets = torch.arange(0, flat.numel(), 5)
    bag_loss = train(BagClassifier(), (flat, offsets), labels)
    with torch.no_grad():
        predictions = (torch.sigmoid(BagClassifier()(flat, offsets)) > 0.5).long()
    print(f"lstm {loss.item():.4f}, bag {bag_loss.item():.4f}, positive {predictions.sum().item()}")
    return loss.item()


if __name__ == "__main__":
    main()
