/* gpu-nvml: not written yet */
