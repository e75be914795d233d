"""A word-level language model training loop: batchify a token stream, truncated BPTT with
``narrow``, a causal self-attention block (``scaled_dot_product_attention``) and an LSTM,
repackaged hidden state, clipped gradients and perplexity."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

NTOKENS, BPTT = 30, 6


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        length, batch, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (t.reshape(length, batch * self.heads, -1).transpose(0, 1) for t in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=0.1)
        return self.proj(out.transpose(0, 1).reshape(length, batch, d))


class RNNModel(nn.Module):
    def __init__(self, ninp=16, nhid=16):
        super().__init__()
        self.encoder = nn.Embedding(NTOKENS, ninp)
        self.attention = CausalSelfAttention(ninp, 2)
        self.norm = nn.LayerNorm(ninp)
        self.rnn = nn.LSTM(ninp, nhid, 2, dropout=0.2)
        self.decoder = nn.Linear(nhid, NTOKENS)
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)

    def forward(self, src, hidden):
        emb = self.encoder(src)
        emb = self.norm(emb + self.attention(emb))
        output, hidden = self.rnn(emb, hidden)
        return F.log_softmax(self.decoder(output), dim=-1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(2, bsz, 16), weight.new_zeros(2, bsz, 16))


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def main() -> float:
    torch.manual_seed(7)
    train_data = batchify(torch.randint(0, NTOKENS, (200,)), 4)
    model = RNNModel()
    criterion = nn.NLLLoss()
    lr, total = 5.0, 0.0
    hidden = model.init_hidden(4)
    model.train()
    for i in range(0, train_data.size(0) - 1 - BPTT, BPTT):
        data, targets = train_data[i : i + BPTT], train_data[i + 1 : i + 1 + BPTT].reshape(-1)
        hidden = repackage_hidden(hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output.view(-1, NTOKENS), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        total += loss.item()
    print(f"loss {loss.item():.3f}, ppl {math.exp(loss.item()):.2f}")
    return loss.item()


if __name__ == "__main__":
    main()
