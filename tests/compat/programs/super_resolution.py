"""Single-image super-resolution (ESPCN-style): reflection-padded convolutions, PReLU, a
sub-pixel ``PixelShuffle`` upscaler, MSE loss and PSNR, against bilinear upsampling."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class ESPCN(nn.Module):
    def __init__(self, scale: int = 2) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.ReflectionPad2d(2),
            nn.Conv2d(1, 16, 5),
            nn.PReLU(),
            nn.ReplicationPad2d(1),
            nn.Conv2d(16, 8, 3),
            nn.PReLU(8),
            nn.ZeroPad2d(1),
            nn.Conv2d(8, scale**2, 3),
        )
        self.shuffle = nn.PixelShuffle(scale)

    def forward(self, x):
        return torch.sigmoid(self.shuffle(self.body(x)))


def psnr(prediction, target):
    mse = F.mse_loss(prediction, target)
    return 10 * torch.log(1.0 / mse) / math.log(10)


def main() -> float:
    torch.manual_seed(4)
    high = torch.rand(4, 1, 16, 16)
    low = F.interpolate(high, scale_factor=0.5, mode="bilinear", align_corners=False)
    model = ESPCN()
    optimizer = optim.Adam(model.parameters(), lr=1e-3)
    scheduler = optim.lr_scheduler.MultiStepLR(optimizer, milestones=[2], gamma=0.5)
    criterion = nn.MSELoss()
    for _step in range(4):
        optimizer.zero_grad()
        loss = criterion(model(low), high)
        loss.backward()
        optimizer.step()
        scheduler.step()
    with torch.no_grad():
        upscaled = model(low).clamp(0.0, 1.0)
        baseline = F.interpolate(low, size=high.shape[-2:], mode="bilinear")
        print(
            f"psnr {psnr(upscaled, high).item():.2f} dB, bilinear {psnr(baseline, high).item():.2f}"
        )
    return loss.item()


if __name__ == "__main__":
    main()
