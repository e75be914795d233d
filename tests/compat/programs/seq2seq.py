"""Sequence-to-sequence reversal: a GRU encoder, a GRU decoder with teacher forcing, gradient
clipping, and sampling with ``multinomial`` at inference."""

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, HIDDEN, LENGTH, BOS = 10, 16, 5, 0


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, HIDDEN)
        self.gru = nn.GRU(HIDDEN, HIDDEN, batch_first=True)

    def forward(self, src):
        _, hidden = self.gru(self.embedding(src))
        return hidden


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, HIDDEN)
        self.gru = nn.GRU(HIDDEN, HIDDEN, batch_first=True)
        self.out = nn.Linear(HIDDEN, VOCAB)

    def forward(self, token, hidden):
        output, hidden = self.gru(F.relu(self.embedding(token)), hidden)
        return F.log_softmax(self.out(output.squeeze(1)), dim=-1), hidden


def decode(encoder, decoder, src, target=None):
    hidden = encoder(src)
    token = torch.full((src.size(0), 1), BOS, dtype=torch.long)
    outputs = []
    for t in range(LENGTH):
        log_probs, hidden = decoder(token, hidden)
        outputs.append(log_probs.unsqueeze(1))
        if target is not None:
            token = target[:, t].unsqueeze(1)  # teacher forcing
        else:
            token = torch.multinomial(log_probs.exp(), 1)
    return torch.cat(outputs, dim=1)


def main() -> float:
    torch.manual_seed(2)
    src = torch.randint(1, VOCAB, (8, LENGTH))
    target = src.flip(1)
    encoder, decoder = Encoder(), Decoder()
    params = list(encoder.parameters()) + list(decoder.parameters())
    optimizer = torch.optim.Adam(params, lr=0.01)
    criterion = nn.NLLLoss()
    for _step in range(4):
        optimizer.zero_grad()
        log_probs = decode(encoder, decoder, src, target)
        loss = criterion(log_probs.reshape(-1, VOCAB), target.reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
    with torch.set_grad_enabled(False):
        sampled = decode(encoder, decoder, src).argmax(-1)
    print(f"loss {loss.item():.4f}, sampled {tuple(sampled.shape)}")
    return loss.item()


if __name__ == "__main__":
    main()
