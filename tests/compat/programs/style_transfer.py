"""Neural style transfer (Gatys et al.): a frozen feature network, Gram-matrix style loss and a
content loss, optimizing the image itself; plus a feed-forward transformer net's residual block."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def gram_matrix(features):
    b, c, h, w = features.size()
    flat = features.view(b, c, h * w)
    return flat.bmm(flat.transpose(1, 2)) / (c * h * w)


class ResidualBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.block = nn.Sequential(
            nn.ReflectionPad2d(1),
            nn.Conv2d(channels, channels, 3),
            nn.InstanceNorm2d(channels, affine=True),
            nn.ReLU(),
            nn.ReflectionPad2d(1),
            nn.Conv2d(channels, channels, 3),
            nn.InstanceNorm2d(channels, affine=True),
        )

    def forward(self, x):
        return x + self.block(x)


def main() -> float:
    torch.manual_seed(5)
    features = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2), nn.Conv2d(8, 8, 3, padding=1)
    ).eval()
    for p in features.parameters():
        p.requires_grad_(False)
    content, style = torch.rand(1, 3, 16, 16), torch.rand(1, 3, 16, 16)
    target_content = features(content).detach()
    target_gram = gram_matrix(features(style)).detach()
    image = content.clone().requires_grad_(True)
    optimizer = torch.optim.Adam([image], lr=0.05)
    for _step in range(5):
        optimizer.zero_grad()
        f = features(image)
        loss = F.mse_loss(f, target_content) + 1e3 * F.mse_loss(gram_matrix(f), target_gram)
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            image.clamp_(0, 1)
    transformer = nn.Sequential(ResidualBlock(3), nn.Upsample(scale_factor=2, mode="nearest"))
    stylized = transformer(image.detach())
    print(f"loss {loss.item():.5f}, stylized {tuple(stylized.shape)}")
    return loss.item()


if __name__ == "__main__":
    main()
