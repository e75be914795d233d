"""One GAN training phase: a transposed-conv generator and a conv discriminator (DCGAN-style),
BCE losses with real/fake labels from ``torch.full``, two Adam optimizers."""

import torch
import torch.nn as nn
import torch.optim as optim

LATENT = 8


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.constant_(m.bias, 0)


def make_models():
    generator = nn.Sequential(
        nn.ConvTranspose2d(LATENT, 16, 4, 1, 0, bias=False),
        nn.BatchNorm2d(16),
        nn.PReLU(16),
        nn.ConvTranspose2d(16, 1, 4, 2, 1, bias=False),
        nn.Tanh(),
    )
    discriminator = nn.Sequential(
        nn.Conv2d(1, 16, 4, 2, 1, bias=False),
        nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(16, 1, 4, 1, 0, bias=False),
        nn.Sigmoid(),
    )
    generator.apply(weights_init)
    discriminator.apply(weights_init)
    return generator, discriminator


def main() -> float:
    torch.manual_seed(1)
    net_g, net_d = make_models()
    criterion = nn.BCELoss()
    opt_d = optim.Adam(net_d.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_g = optim.Adam(net_g.parameters(), lr=2e-4, betas=(0.5, 0.999))
    real = torch.rand(6, 1, 8, 8) * 2 - 1
    for _step in range(3):
        net_d.zero_grad()
        label = torch.full((real.size(0),), 1.0, dtype=torch.float)
        err_real = criterion(net_d(real).view(-1), label)
        err_real.backward()
        noise = torch.randn(real.size(0), LATENT, 1, 1)
        fake = net_g(noise)
        label.fill_(0.0)
        err_fake = criterion(net_d(fake.detach()).view(-1), label)
        err_fake.backward()
        opt_d.step()
        net_g.zero_grad()
        label.fill_(1.0)
        err_g = criterion(net_d(fake).view(-1), label)
        err_g.backward()
        opt_g.step()
    print(f"loss_D {(err_real + err_fake).item():.4f} loss_G {err_g.item():.4f}")
    return err_g.item()


if __name__ == "__main__":
    main()
