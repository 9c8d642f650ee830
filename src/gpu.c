/* gpu: not written yet */
