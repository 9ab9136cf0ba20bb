// Consumer of graphcheck::torch: the spans of a LibTorch module's parameters.
#include <graphcheck/torch/registry.h>
#include <torch/nn/modules/linear.h>

#include <iostream>

int main() {
  torch::nn::Linear linear(4, 8);
  graphcheck::libtorch::Registry registry;
  registry.add_module(*linear);
  for (const graphcheck::Span& span : registry.spans()) {
    std::cout << span.name << " " << span.size << "\n";
  }
  return 0;
}
