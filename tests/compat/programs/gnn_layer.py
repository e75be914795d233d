"""A two-layer graph convolutional network (Kipf & Welling) on a random graph: normalized
adjacency ``D^-1/2 (A + I) D^-1/2`` from an edge list, node classification with masks."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class GraphConv(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_features, out_features))
        self.bias = nn.Parameter(torch.zeros(out_features))
        nn.init.xavier_uniform_(self.weight)

    def forward(self, x, adj):
        return adj @ (x @ self.weight) + self.bias


def normalized_adjacency(edge_index, n):
    adj = torch.zeros(n, n)
    adj[edge_index[0], edge_index[1]] = 1.0
    adj = adj + adj.t() + torch.eye(n)
    adj = adj.clamp(max=1.0)
    degree = adj.sum(dim=1)
    d_inv_sqrt = torch.diag(degree.pow(-0.5))
    return d_inv_sqrt @ adj @ d_inv_sqrt


def main() -> float:
    torch.manual_seed(3)
    n, features, classes = 20, 6, 3
    edge_index = torch.randint(0, n, (2, 40))
    adj = normalized_adjacency(edge_index, n)
    x = torch.randn(n, features)
    y = torch.randint(0, classes, (n,))
    perm = torch.randperm(n)
    train_mask = torch.zeros(n, dtype=torch.bool)
    train_mask[perm[:12]] = True
    conv1, conv2 = GraphConv(features, 16), GraphConv(16, classes)
    params = list(conv1.parameters()) + list(conv2.parameters())
    optimizer = torch.optim.Adam(params, lr=0.01, weight_decay=5e-4)
    for _epoch in range(5):
        optimizer.zero_grad()
        h = F.dropout(F.relu(conv1(x, adj)), p=0.5, training=True)
        out = conv2(h, adj)
        loss = F.cross_entropy(out[train_mask], y[train_mask])
        loss.backward()
        optimizer.step()
    accuracy = (out.argmax(1)[~train_mask] == y[~train_mask]).float().mean()
    print(f"loss {loss.item():.4f}, test accuracy {accuracy.item():.3f}")
    return loss.item()


if __name__ == "__main__":
    main()
