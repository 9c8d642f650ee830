/*
 * The program each layer library is linked whole into, with only the libraries it names
 * (src/meson.build): it is never run; that it links is the check.
 */

int main(void)
{
	return 0;
}
